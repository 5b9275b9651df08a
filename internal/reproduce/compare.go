// Package reproduce compares a published artifact folder with the same
// target rebuilt from the same recipe, source revision and toolchains:
// file by file, by digest, and, where a model differs, by how much its
// measured quality moved.
package reproduce

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// File statuses.
const (
	Identical = "identical"
	Differs   = "differs"
	// Missing: the manifest lists it, the rebuild did not make it.
	Missing = "missing"
	// Extra: the rebuild made it, the manifest does not list it.
	Extra = "extra"
	// Tampered: the rebuild matches the manifest, but the published folder
	// no longer does: the file was changed after publishing.
	Tampered = "changed after publishing"
	// NotRebuilt: the rebuilt target was not published (its gate failed).
	NotRebuilt = "not rebuilt"
	// Log: step logs record times and paths; they are listed, not judged.
	Log = "log, not compared"
	// OriginalGone: a step's original output is no longer in the cache
	// (collected, or made on another machine), so only the published
	// files can be compared.
	OriginalGone = "original not in the cache"
)

// File is one file of the artifact.
type File struct {
	Path   string `json:"path"`
	Status string `json:"status"`
	// Published is the manifest's sha256, Rebuilt the rebuild's, and
	// OnDisk the published folder's when it differs from its manifest.
	Published string `json:"published_sha256,omitempty"`
	Rebuilt   string `json:"rebuilt_sha256,omitempty"`
	OnDisk    string `json:"on_disk,omitempty"`
}

// Perplexity is the quality gate's converted-model perplexity, published
// and rebuilt, on the same tokens.
type Perplexity struct {
	Published float64 `json:"published"`
	Rebuilt   float64 `json:"rebuilt"`
	Delta     float64 `json:"delta"`
	Baseline  float64 `json:"published_baseline"`
	// RebuiltBaseline is the rebuild's own baseline.
	RebuiltBaseline float64 `json:"rebuilt_baseline"`
}

// Step is one step's output, the original (from the cache, when it still
// holds it) against the rebuild's.
type Step struct {
	ID     string   `json:"id"`
	Status string   `json:"status"` // Identical, Differs, OriginalGone, NotRebuilt
	Files  []string `json:"differing_files,omitempty"`
	// Argv is set when the step's command lines differ beyond cache paths.
	Argv string `json:"argv_difference,omitempty"`
}

// Report is one artifact folder's reproduction.
type Report struct {
	Dir    string `json:"dir"`
	Target string `json:"target"`
	Format string `json:"format"`
	// Identical is true when every non-log file is bit-identical, the
	// published folder still matches its manifest and the rebuild read the
	// same source files.
	Identical bool   `json:"identical"`
	Files     []File `json:"files"`
	// SourceDiffers lists source files whose digests differ from the
	// manifest's (a source that moved or a local folder that was edited).
	SourceDiffers []string    `json:"source_differs,omitempty"`
	Perplexity    *Perplexity `json:"perplexity,omitempty"`
	Steps         []Step      `json:"steps,omitempty"`
}

// IsLog reports whether a published file is a step log.
func IsLog(path string) bool { return strings.HasPrefix(path, "logs/") }

// Compare builds the report of one folder: pub is its manifest, problems
// what verifying the folder against it found, rebuilt the manifest of the
// rebuilt target (nil when the rebuild published nothing) and source the
// rebuild's source files.
func Compare(dir string, pub *manifest.Manifest, problems []manifest.Problem, rebuilt *manifest.Manifest, source []manifest.File) Report {
	r := Report{Dir: dir, Target: pub.Target.Name, Format: pub.Target.Format}
	onDisk := map[string]manifest.Problem{}
	for _, p := range problems {
		onDisk[p.Path] = p
	}
	again := map[string]manifest.File{}
	if rebuilt != nil {
		for _, f := range rebuilt.Files {
			again[f.Path] = f
		}
	}
	listed := map[string]bool{}
	for _, f := range pub.Files {
		listed[f.Path] = true
		fr := File{Path: f.Path, Published: f.SHA256}
		g, made := again[f.Path]
		if made {
			fr.Rebuilt = g.SHA256
		}
		if p, changed := onDisk[f.Path]; changed {
			fr.OnDisk = p.Kind
			if p.Got != "" {
				fr.OnDisk += ": " + p.Got
			}
		}
		switch {
		case IsLog(f.Path):
			fr.Status = Log
		case rebuilt == nil:
			fr.Status = NotRebuilt
		case !made:
			fr.Status = Missing
		case g.SHA256 != f.SHA256 || g.Size != f.Size:
			fr.Status = Differs
		case fr.OnDisk != "":
			fr.Status = Tampered
		default:
			fr.Status = Identical
		}
		r.Files = append(r.Files, fr)
	}
	for _, g := range sortedFiles(again) {
		if !listed[g.Path] {
			st := Extra
			if IsLog(g.Path) {
				st = Log
			}
			r.Files = append(r.Files, File{Path: g.Path, Status: st, Rebuilt: g.SHA256})
		}
	}
	// Files someone added to the published folder after publishing.
	for _, p := range problems {
		if p.Kind == manifest.Extra {
			r.Files = append(r.Files, File{Path: p.Path, Status: Tampered, OnDisk: "not in the manifest: " + p.Got})
		}
	}
	sort.SliceStable(r.Files, func(i, j int) bool { return r.Files[i].Path < r.Files[j].Path })

	r.SourceDiffers = diffFiles(pub.Source.Files, source)
	if rebuilt != nil {
		r.Perplexity = perplexityOf(pub, rebuilt.Metrics.Perplexity)
	}
	r.Identical = len(r.SourceDiffers) == 0
	for _, f := range r.Files {
		if f.Status != Identical && f.Status != Log {
			r.Identical = false
		}
	}
	return r
}

// perplexityOf pairs the published gate's numbers with the rebuild's.
func perplexityOf(pub *manifest.Manifest, again *manifest.Perplexity) *Perplexity {
	p := pub.Metrics.Perplexity
	if p == nil || again == nil {
		return nil
	}
	return &Perplexity{Published: p.Converted, Rebuilt: again.Converted, Delta: again.Converted - p.Converted,
		Baseline: p.Baseline, RebuiltBaseline: again.Baseline}
}

// RebuiltPerplexity fills the perplexity of a rebuild that published
// nothing (its gate failed) from the gate's numbers.
func (r *Report) RebuiltPerplexity(pub *manifest.Manifest, baseline, converted float64) {
	r.Perplexity = perplexityOf(pub, &manifest.Perplexity{Baseline: baseline, Converted: converted})
}

func sortedFiles(m map[string]manifest.File) []manifest.File {
	out := make([]manifest.File, 0, len(m))
	for _, f := range m {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// diffFiles lists the paths whose digest differs between two file lists,
// or that only one of them has, sorted.
func diffFiles(a, b []manifest.File) []string {
	am := map[string]string{}
	for _, f := range a {
		am[f.Path] = f.SHA256
	}
	bm := map[string]string{}
	for _, f := range b {
		bm[f.Path] = f.SHA256
	}
	var out []string
	for p, sha := range am {
		if bm[p] != sha {
			out = append(out, p)
		}
	}
	for p := range bm {
		if _, ok := am[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// DiffFiles compares a step's original output files with the rebuild's.
func DiffFiles(orig, again []manifest.File) []string { return diffFiles(orig, again) }

// Cache paths in a command line: the output folder a step fills
// (tmp/KEY.PID.RANDOM), the cached outputs it reads (objects/KEY), its
// scratch folder and the helper scripts' folder. Keys differ between two
// caches even for the same bytes (a step's result.json records its
// temporary paths), so they are masked; the helpers' folder is named by
// the digest of all helper scripts together, and a step's own script is
// identified by its sha256 in the step's cache key.
var (
	keyedPath   = regexp.MustCompile(`/(objects|tmp)/[0-9a-f]{64}(\.\d+\.\d+)?`)
	scratchPath = regexp.MustCompile(`/tmp/scratch-\d+`)
	helpersPath = regexp.MustCompile(`/toolchains/helpers-[0-9a-f]{16}/`)
	rootOf      = regexp.MustCompile(`(/[^\s=:,]*?)/(?:objects/[0-9a-f]{64}|tmp/[0-9a-f]{64}\.\d+\.\d+)`)
)

// CacheRoot guesses the cache folder a manifest's steps ran in from the
// cache paths in their command lines ("" if none has one).
func CacheRoot(steps []manifest.Step) string {
	for _, s := range steps {
		for _, argv := range s.Argv {
			for _, a := range argv {
				if m := rootOf.FindStringSubmatch(a); m != nil {
					return m[1]
				}
			}
		}
	}
	return ""
}

// threadFlags are the flags whose value is the scheduler's thread grant
// (llama.cpp's -t, the helpers' --threads). The grant depends on -j, the
// machine's cores and what ran beside the step; it is recorded in the step's
// result, never in its key, so a rebuild at another grant is the same build.
var threadFlags = map[string]bool{"-t": true, "--threads": true, "-tb": true, "--threads-batch": true}

// NormalizeArgv rewrites cache paths so that two runs in different caches
// compare equal when they ran the same commands: each of roots becomes
// $CACHE, keys become KEY, and a thread count given to a thread flag
// becomes $THREADS.
func NormalizeArgv(argv [][]string, roots ...string) [][]string {
	out := make([][]string, len(argv))
	for i, cmd := range argv {
		out[i] = make([]string, len(cmd))
		for j, a := range cmd {
			for _, r := range roots {
				if r != "" {
					a = strings.ReplaceAll(a, r, "$CACHE")
				}
			}
			a = keyedPath.ReplaceAllString(a, "/$1/KEY")
			a = scratchPath.ReplaceAllString(a, "/tmp/scratch")
			a = helpersPath.ReplaceAllString(a, "/toolchains/helpers/")
			if isThreadGrant(cmd, j) {
				a = "$THREADS"
			}
			out[i][j] = a
		}
	}
	return out
}

// quantType is a llama-quantize type name (Q8_0, Q4_K_M, F16, IQ2_XS).
var quantType = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// isThreadGrant reports whether cmd[j] is the thread count edgepipe gave
// the tool: a thread flag's value, or llama-quantize's optional last
// positional argument (`llama-quantize [options] IN OUT TYPE [NTHREADS]`).
func isThreadGrant(cmd []string, j int) bool {
	if j == 0 || !isCount(cmd[j]) {
		return false
	}
	if threadFlags[cmd[j-1]] {
		return true
	}
	return j == len(cmd)-1 && j >= 4 && filepath.Base(cmd[0]) == "llama-quantize" && quantType.MatchString(cmd[j-1])
}

// isCount reports whether s is a non-negative decimal integer (a thread
// count, not -t's other uses such as qnn-model-lib-generator's target).
func isCount(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// ArgvDifference describes the first difference between two steps'
// normalized command lines, or "" when they are the same.
func ArgvDifference(orig, again [][]string) string {
	if len(orig) != len(again) {
		return fmt.Sprintf("%d command(s) then, %d now", len(orig), len(again))
	}
	for i := range orig {
		a, b := orig[i], again[i]
		n := min(len(a), len(b))
		for j := 0; j < n; j++ {
			if a[j] != b[j] {
				return fmt.Sprintf("command %d, argument %d: %q then, %q now", i+1, j, a[j], b[j])
			}
		}
		if len(a) != len(b) {
			return fmt.Sprintf("command %d: %d arguments then, %d now", i+1, len(a), len(b))
		}
	}
	return ""
}
