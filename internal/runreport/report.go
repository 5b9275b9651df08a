package runreport

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/proc"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/report"
)

// Report file names, beside the run's target folders.
const (
	reportHTML     = "report.html"
	reportMarkdown = "report.md"
)

// Report gathers what report.html, report.md and the job summary show:
// each target's outcome, its gate, and, from its manifest (or the run's
// outputs when nothing was published), its bench and stand-in steps.
func (c *Recorder) Report(outcomes []Outcome, res *engine.RunResult, code int, exitText string) report.Report {
	r := report.Report{Recipe: c.plan.Recipe.Name, ExitCode: code, ExitText: exitText}
	for _, o := range outcomes {
		t := report.Target{Name: o.Target, Format: o.Format, Device: o.Device, Outcome: o.Outcome,
			Verdict: o.Verdict, Artifact: o.Artifact, Pushed: o.Pushed, PushFailed: o.PushFailed, SizeBytes: o.SizeBytes, Error: o.Error}
		if g := o.Gate; g != nil {
			t.Perplexity = &report.Perplexity{Baseline: g.Baseline, Converted: g.Converted, Delta: g.Delta,
				WarnDelta: g.WarnDelta, MaxDelta: g.MaxDelta}
		}
		if o.Outcome == OutcomePublished {
			r.Published++
		}
		var m *manifest.Manifest
		if res != nil && o.Outcome == OutcomePublished {
			m, _ = manifest.Read(res.Published[o.Target])
		}
		if m != nil {
			t.KLDivergence, t.Top1Agreement, t.Bench = m.Metrics.KLDivergence, m.Metrics.Top1Agreement, m.Metrics.Bench
			for _, st := range m.Steps {
				if st.StandIn {
					t.StandIns = append(t.StandIns, st.ID)
					if st.Kind == "bench" {
						t.BenchStandIn = true
					}
				}
			}
		} else {
			t.Bench, t.BenchStandIn = engine.TargetBench(c.plan, res, o.Target)
			t.StandIns = engine.TargetStandIns(c.plan, res, o.Target)
		}
		r.Targets = append(r.Targets, t)
	}
	if res == nil {
		return r
	}
	for _, err := range res.Failed {
		var ge *publish.GateError
		var se *engine.StepError
		switch {
		case errors.As(err, &ge):
			r.Failures = append(r.Failures, report.Failure{Subject: ge.Target, Message: err.Error()})
		case errors.As(err, &se):
			first, _, _ := strings.Cut(err.Error(), "\n")
			f := report.Failure{Subject: se.Step, Step: true, Message: first}
			if tail := proc.Tail(se.LogPath, 20); len(tail) > 0 {
				f.LogName, f.LogTail = RelPath(se.LogPath), tail
			}
			r.Failures = append(r.Failures, f)
		default:
			r.Failures = append(r.Failures, report.Failure{Message: err.Error()})
		}
	}
	return r
}

// WriteReports writes report.html and report.md into the run's output
// folder, each replaced whole so a reader never sees half of one.
func WriteReports(outDir string, r report.Report) error {
	page, err := report.HTML(r)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteMkdir(filepath.Join(outDir, reportHTML), page, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", reportHTML, err)
	}
	if err := atomicfile.WriteMkdir(filepath.Join(outDir, reportMarkdown), report.Markdown(r), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", reportMarkdown, err)
	}
	return nil
}
