// Package runreport is what a run tells the people and machines around
// it: report.html and report.md beside the artifacts, the Markdown job
// summary appended to $GITHUB_STEP_SUMMARY, the JUnit report of --junit
// and the closing run-finished line of --json. A Recorder watches the
// run's events for what the engine's RunResult does not keep (which step
// failed, when, and its log) and turns both into each target's outcome.
package runreport

import (
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/proc"
	"github.com/edgepipe/edgepipe/internal/publish"
)

// Recorder is what a run tells CI: the Markdown job summary appended to
// $GITHUB_STEP_SUMMARY, the JUnit report of --junit, and the closing
// run-finished line of --json. It watches the run's events for what
// RunResult does not keep: which step failed, when, and its log.
type Recorder struct {
	plan    *plan.Plan
	started time.Time
	// OutDir, when set, receives report.html and report.md.
	OutDir string
	// Version is the edgepipe that ran, for the reports.
	Version string
	// AllTargets names every target of the recipe, in its order, when the
	// run built only some (run --target): the reports keep the others an
	// earlier run published into OutDir.
	AllTargets []string

	mu    sync.Mutex
	steps map[string]*stepRecord
	// pushed and pushFailed list each target's remotes (publish:) by outcome.
	pushed, pushFailed map[string][]string
}

type stepRecord struct {
	kind    string
	status  string // an event type: step-finished, step-failed, ...
	seconds float64
	message string
	log     string
}

func New(pl *plan.Plan) *Recorder {
	return &Recorder{plan: pl, started: time.Now(), steps: map[string]*stepRecord{},
		pushed: map[string][]string{}, pushFailed: map[string][]string{}}
}

func (c *Recorder) Event(ev event.Event) {
	if ev.Step == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.steps[ev.Step]
	if r == nil {
		r = &stepRecord{}
		c.steps[ev.Step] = r
	}
	switch ev.Type {
	case event.Started:
		r.kind, r.log = ev.Kind, ev.Path
	case event.Gate, event.Log:
		return // a verdict or a remark, not the step's end
	case event.Pushed:
		c.pushed[ev.Target] = append(c.pushed[ev.Target], ev.Path)
		return // after the publish, which already ended the step
	case event.PushFailed:
		c.pushFailed[ev.Target] = append(c.pushFailed[ev.Target], ev.Path)
		return
	}
	r.status = ev.Type
	if ev.Seconds > 0 {
		r.seconds = ev.Seconds
	}
	if ev.Type == event.Failed {
		r.message = ev.Message
		if ev.Path != "" {
			r.log = ev.Path
		}
	}
}

// failedSteps lists the steps that failed (not their skipped dependents),
// in plan order.
func (c *Recorder) failedSteps() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.plan.Steps {
		if r := c.steps[s.ID]; r != nil && r.status == event.Failed {
			out = append(out, s.ID)
		}
	}
	return out
}

// Target outcomes.
const (
	OutcomePublished  = "published"
	OutcomeGateFailed = "gate-failed"
	OutcomeBlocked    = "blocked" // an upstream step failed
	OutcomeNotRun     = "not-run" // interrupted, or stopped by a failure elsewhere
)

// Outcome is one target's row in every CI report.
type Outcome struct {
	Target    string              `json:"target"`
	Device    string              `json:"device"`
	Format    string              `json:"format"`
	Outcome   string              `json:"outcome"`
	Verdict   string              `json:"verdict,omitempty"`
	Gate      *publish.GateResult `json:"gate,omitempty"`
	SizeBytes int64               `json:"size_bytes,omitempty"`
	Artifact  string              `json:"artifact,omitempty"`
	// Error is the gate's sentence, or which upstream steps failed.
	Error       string   `json:"error,omitempty"`
	FailedSteps []string `json:"failed_steps,omitempty"`
	// StoppedBy is the failure after which fail-fast stopped the run
	// before this target, which needs nothing that failed, was built.
	StoppedBy string `json:"stopped_by,omitempty"`
	// Pushed lists where the artifact was pushed (oci://...@DIGEST, S3
	// prefixes); PushFailed the remotes whose push failed.
	Pushed     []string `json:"pushed,omitempty"`
	PushFailed []string `json:"push_failed,omitempty"`
	// Accuracy is an image classifier's gate (in place of Gate).
	Accuracy *publish.AccuracyResult `json:"accuracy,omitempty"`
	// Agreement is an image classifier's agreement gate.
	Agreement *publish.AgreementResult `json:"agreement,omitempty"`
}

func (c *Recorder) Outcomes(res *engine.RunResult) []Outcome {
	failed := c.failedSteps()
	isFailed := map[string]bool{}
	for _, id := range failed {
		isFailed[id] = true
	}
	var out []Outcome
	for _, t := range c.plan.Recipe.Targets {
		o := Outcome{Target: t.Name, Device: t.Device, Format: t.Format, Outcome: OutcomeNotRun}
		if res == nil {
			out = append(out, o)
			continue
		}
		if g := res.Gates[t.Name]; g != nil {
			o.Gate, o.Verdict = g, g.Verdict
		}
		if a := res.Agreement[t.Name]; a != nil {
			o.Agreement, o.Verdict = a, a.Verdict
		}
		// With both gates, a failed one is the verdict.
		if a := res.Accuracy[t.Name]; a != nil && (o.Verdict == "" || a.Verdict == manifest.VerdictFail) {
			o.Accuracy, o.Verdict = a, a.Verdict
		} else if a != nil {
			o.Accuracy = a
		}
		c.mu.Lock()
		o.Pushed, o.PushFailed = c.pushed[t.Name], c.pushFailed[t.Name]
		c.mu.Unlock()
		if dir, ok := res.Published[t.Name]; ok {
			o.Outcome, o.Artifact = OutcomePublished, RelPath(dir)
			if m, err := manifest.Read(dir); err == nil && m.Metrics.SizeBytes != nil {
				o.SizeBytes = *m.Metrics.SizeBytes
			}
		} else if ge := gateErrorFor(res, t.Name); ge != nil {
			o.Outcome, o.Error = OutcomeGateFailed, ge.Error()
			if o.Verdict == "" {
				o.Verdict = manifest.VerdictFail
			}
		} else if by := res.Stopped[plan.PublishStepID(t.Name)]; by != "" {
			o.StoppedBy = by
			o.Error = fmt.Sprintf("not run (stopped after %s failed)", by)
		} else if up := c.upstream(plan.PublishStepID(t.Name), isFailed); len(up) > 0 {
			o.Outcome, o.FailedSteps = OutcomeBlocked, up
			o.Error = fmt.Sprintf("not built: step %s failed", strings.Join(up, ", "))
		}
		out = append(out, o)
	}
	return out
}

func gateErrorFor(res *engine.RunResult, target string) *publish.GateError {
	for _, err := range res.Failed {
		var ge *publish.GateError
		if errors.As(err, &ge) && ge.Target == target {
			return ge
		}
	}
	return nil
}

// upstream lists the failed steps that id depends on, in plan order.
func (c *Recorder) upstream(id string, failed map[string]bool) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(id string) {
		if seen[id] {
			return
		}
		seen[id] = true
		if s, ok := c.plan.Step(id); ok {
			for _, n := range s.Needs {
				walk(n)
			}
		}
	}
	walk(id)
	var out []string
	for _, s := range c.plan.Steps {
		if seen[s.ID] && failed[s.ID] {
			out = append(out, s.ID)
		}
	}
	return out
}

// Finished is the last line of `run --json`: every target's outcome and
// the exit code, so a CI script needs no other parsing.
type Finished struct {
	Time     time.Time `json:"time"`
	Type     string    `json:"event"`
	Recipe   string    `json:"recipe"`
	ExitCode int       `json:"exit_code"`
	Seconds  float64   `json:"seconds"`
	Targets  []Outcome `json:"targets"`
}

// JUnit report types: the common Jenkins/Ant schema that GitHub test
// reporters, GitLab and Jenkins read.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

// junitText is multi-line text kept readable: CDATA, not &#xA; escapes.
type junitText struct {
	Text string `xml:",cdata"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",cdata"`
}

func seconds(s float64) string { return fmt.Sprintf("%.3f", s) }

// junit is one test suite for the recipe: a test case per target for its
// quality gate (failed when the gate failed, skipped when the target was
// never built) and one per failed step.
func (c *Recorder) JUnit(outcomes []Outcome, version string) []byte {
	recipe := c.plan.Recipe.Name
	suite := junitSuite{Name: recipe, Time: seconds(time.Since(c.started).Seconds()),
		Timestamp:  c.started.UTC().Format("2006-01-02T15:04:05"),
		Properties: []junitProperty{{Name: "recipe", Value: c.plan.Recipe.Path}, {Name: "edgepipe", Value: version}}}
	record := func(id string) stepRecord {
		c.mu.Lock()
		defer c.mu.Unlock()
		if r := c.steps[id]; r != nil {
			return *r
		}
		return stepRecord{}
	}
	for _, o := range outcomes {
		tc := junitCase{Name: o.Target, Classname: recipe + ".gate",
			Time: seconds(record(plan.PublishStepID(o.Target)).seconds)}
		var out []string
		out = append(out, fmt.Sprintf("format %s on %s", o.Format, o.Device))
		if g := o.Gate; g != nil {
			out = append(out, fmt.Sprintf("perplexity %.4f, baseline %.4f, delta %+.4f (warn over %.2f, fail over %.2f): %s",
				g.Converted, g.Baseline, g.Delta, g.WarnDelta, g.MaxDelta, g.Verdict))
		}
		switch o.Outcome {
		case OutcomePublished:
			if o.Gate == nil {
				out = append(out, "published; the format has no perplexity gate")
			}
			out = append(out, "artifact: "+o.Artifact)
		case OutcomeGateFailed:
			tc.Failure = &junitMessage{Message: xmlText(o.Error), Type: "quality-gate", Text: xmlText(strings.Join(out, "\n"))}
			suite.Failures++
		case OutcomeBlocked:
			tc.Skipped = &junitMessage{Message: xmlText(o.Error)}
			suite.Skipped++
		default:
			tc.Skipped = &junitMessage{Message: "not built: the run stopped before this target"}
			suite.Skipped++
		}
		tc.SystemOut = &junitText{xmlText(strings.Join(out, "\n"))}
		suite.Cases = append(suite.Cases, tc)
	}
	for _, id := range c.failedSteps() {
		r := record(id)
		// The message's first line says what failed; the body holds the
		// rest, with the log's tail unless the message already quotes it.
		first, _, _ := strings.Cut(r.message, "\n")
		text := r.message
		if r.log != "" && !strings.Contains(r.message, r.log) {
			if tail := proc.Tail(r.log, 40); len(tail) > 0 {
				text += "\n\nlast lines of " + r.log + ":\n" + strings.Join(tail, "\n")
			}
		}
		suite.Cases = append(suite.Cases, junitCase{Name: id, Classname: recipe + ".step", Time: seconds(r.seconds),
			Error: &junitMessage{Message: xmlText(first), Type: "step-failed", Text: xmlText(text)}})
		suite.Errors++
	}
	suite.Tests = len(suite.Cases)
	all := junitSuites{Name: "edgepipe", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors,
		Skipped: suite.Skipped, Time: suite.Time, Suites: []junitSuite{suite}}
	b, _ := xml.MarshalIndent(all, "", "  ")
	return append([]byte(xml.Header), append(b, '\n')...)
}

// xmlText drops what XML 1.0 cannot hold (control characters from tool
// logs): a report that does not parse is worse than a missing byte. The
// Markdown summary drops them too.
func xmlText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20 || r == 0xFFFE || r == 0xFFFF || r == utf8.RuneError:
			return -1
		}
		return r
	}, s)
}

func AppendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func RelPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

// Finished is the run-finished line for this run.
func (c *Recorder) Finished(code int, outcomes []Outcome) Finished {
	return Finished{Time: time.Now(), Type: "run-finished", Recipe: c.plan.Recipe.Name,
		ExitCode: code, Seconds: time.Since(c.started).Seconds(), Targets: outcomes}
}
