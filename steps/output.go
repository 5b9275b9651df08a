package steps

import (
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/tools"
)

// Output is the executor's record of a finished step: where its output
// lives, what it holds and how it was made. Publishing and the reports read
// these records; kinds see the narrower Input.
type Output struct {
	StepID string
	Kind   string
	// KindVersion is the version of the kind that made the output.
	KindVersion int
	Dir         string
	Key         string
	// Digest identifies the output's content, without its log and
	// timings, so downstream keys move only when content moves.
	Digest   string
	Files    []digest.FileDigest
	Result   *Result
	CacheHit bool
	Started  time.Time
	Finished time.Time
	LogPath  string
	Tools    []*tools.Tool
}

// LogFile is the step's log inside its cached output.
const LogFile = "step.log"

// ContentDigest digests a step's output files without its log, so a rerun
// that made the same bytes leaves downstream keys unchanged.
func ContentDigest(files []digest.FileDigest) string {
	var kept []digest.FileDigest
	for _, f := range files {
		if f.Path == LogFile {
			continue
		}
		kept = append(kept, f)
	}
	k, _ := digest.Key(kept)
	return k
}

// ContentFiles are the output's files without the step's log and result
// record: what the step made (a local folder's files are all content).
func (o *Output) ContentFiles() []digest.FileDigest {
	var out []digest.FileDigest
	for _, f := range o.Files {
		if o.Key != "" && (f.Path == LogFile || f.Path == ResultFile) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// FileName turns a step id into a file name (logs are named after steps).
func FileName(stepID string) string {
	return strings.NewReplacer(":", "_", "/", "_", "@", "_", "+", "_").Replace(stepID)
}
