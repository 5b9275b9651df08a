// Package event is the vocabulary of a run: what happened to which step, for
// progress output, the --json event stream, CI summaries and reports.
package event

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// Event is one thing that happened during a run, for progress output, the
// --json event stream and CI summaries.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"event"` // step-started, step-finished, step-cached, step-failed, step-skipped, gate, published, pushed, push-failed, log
	Step    string    `json:"step,omitempty"`
	Kind    string    `json:"kind,omitempty"`
	Target  string    `json:"target,omitempty"`
	Seconds float64   `json:"seconds,omitempty"`
	Message string    `json:"message,omitempty"`
	Path    string    `json:"path,omitempty"`
	Key     string    `json:"cache_key,omitempty"`
	// Phases, in the overhead event that ends a run, are the seconds spent
	// in each part of edgepipe's own work and in the tools, summed over
	// steps (engine.Phase*).
	Phases map[string]float64 `json:"phases,omitempty"`
	// MappedBytes, in the overhead event, are the file bytes the run
	// hashed through memory mappings, which read(2) counters such as
	// /proc/PID/io's rchar do not see.
	MappedBytes int64 `json:"mapped_bytes,omitempty"`
	// Done and Total, in a progress event, are how far the step's tool
	// (Message) is, in its own units (tensors, chunks); ETASeconds is the
	// time left at the rate so far, when there is one.
	Done       int64   `json:"done,omitempty"`
	Total      int64   `json:"total,omitempty"`
	ETASeconds float64 `json:"eta_seconds,omitempty"`
}

// Event types.
const (
	Started   = "step-started"
	Finished  = "step-finished"
	Cached    = "step-cached"
	Failed    = "step-failed"
	Skipped   = "step-skipped"
	Canceled  = "step-canceled"
	Gate      = "gate"
	Published = "published"
	// Pushed and PushFailed report a push to a remote (publish: in the
	// recipe); Path is where it went (oci://HOST/REPO:TAG@DIGEST, or the
	// S3 prefix).
	Pushed     = "pushed"
	PushFailed = "push-failed"
	// Log is something the run says about a step that is not its state:
	// an evicted corrupt cache entry, a rebuild.
	Log = "log"
	// Overhead ends a run: where its time went (Phases). The terminal
	// output does not show it; --json does.
	Overhead = "overhead"
	// Progress is how far a running step's tool is (Done of Total).
	Progress = "progress"
)

// StepSeconds reads JSON-lines events (`run --json`) and returns how long
// each step that ran took (publishing excluded).
func StepSeconds(jsonl []byte) map[string]float64 {
	out := map[string]float64{}
	for _, line := range bytes.Split(jsonl, []byte("\n")) {
		var ev Event
		if json.Unmarshal(line, &ev) == nil && ev.Type == Finished && !strings.HasPrefix(ev.Step, "publish:") {
			out[ev.Step] = ev.Seconds
		}
	}
	return out
}
