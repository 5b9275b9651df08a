package runreport

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/edgepipe/edgepipe/internal/getter"
	"github.com/edgepipe/edgepipe/internal/plan"
	"io"
	"io/fs"
	"os"
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
	r := report.Report{Recipe: c.plan.Recipe.Name, ExitCode: code, ExitText: exitText,
		Date: c.started, Version: c.Version, Source: getter.Redact(c.plan.Recipe.Model.Source)}
	if res != nil {
		if src := res.Outputs[plan.SourceStepID]; src != nil && src.Result != nil {
			r.Revision = src.Result.Revision
		}
	}
	for _, o := range outcomes {
		t := report.Target{Name: o.Target, Format: o.Format, Device: o.Device, Outcome: o.Outcome,
			Verdict: o.Verdict, Artifact: o.Artifact, Pushed: o.Pushed, PushFailed: o.PushFailed, SizeBytes: o.SizeBytes, Error: o.Error, StoppedBy: o.StoppedBy}
		if g := o.Gate; g != nil {
			t.Perplexity = &report.Perplexity{Baseline: g.Baseline, Converted: g.Converted, Delta: g.Delta,
				WarnDelta: g.WarnDelta, MaxDelta: g.MaxDelta}
			if g.Low != nil && g.High != nil {
				t.Perplexity.DeltaCI95 = &[2]float64{*g.Low, *g.High}
			}
		}
		if a := o.Accuracy; a != nil {
			t.Accuracy = &report.Accuracy{Reference: a.Reference, Converted: a.Converted, Drop: a.Drop, MaxDrop: a.MaxDrop}
		}
		if a := o.Agreement; a != nil {
			t.Agreement = &report.AgreementGate{Agreement: a.Agreement, Min: a.Min}
		}
		if o.Outcome == OutcomePublished {
			r.Published++
		}
		var m *manifest.Manifest
		if res != nil && o.Outcome == OutcomePublished {
			m, _ = manifest.Read(res.Published[o.Target])
		}
		if m != nil {
			t.Manifest, t.Logs = links(c.OutDir, res.Published[o.Target], m)
			if r.Revision == "" {
				r.Revision = m.Source.ResolvedRevision
			}
			t.KLDivergence, t.Top1Agreement, t.Bench = m.Metrics.KLDivergence, m.Metrics.Top1Agreement, m.Metrics.Bench
			if a := m.Metrics.Accuracy; a != nil {
				t.Top1Agreement = a.Agreement // the share of images both models put in the same class
			}
			if a := m.Metrics.Agreement; a != nil {
				v := a.Agreement
				t.Top1Agreement = &v
			}
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
		// Published or not: a target that failed its gate was measured too.
		t.Generation, _ = engine.TargetGeneration(c.plan, res, o.Target)
		if m != nil && m.Metrics.Generation != nil {
			t.Generation = m.Metrics.Generation
		}
		t.VisionBench, t.VisionBenchStandIn = engine.TargetVisionBench(c.plan, res, o.Target)
		if m != nil && m.Metrics.VisionBench != nil {
			t.VisionBench = m.Metrics.VisionBench
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

// links are a published folder's manifest and step logs, relative to the
// reports' folder (slash-separated: they are URLs in report.html).
func links(outDir, dir string, m *manifest.Manifest) (string, []string) {
	rel, err := filepath.Rel(outDir, dir)
	if err != nil || outDir == "" {
		return "", nil
	}
	rel = filepath.ToSlash(rel)
	var logs []string
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, "logs/") {
			logs = append(logs, rel+"/"+f.Path)
		}
	}
	return rel + "/" + manifest.FileName, logs
}

// WriteReports writes report.html and report.md into the run's output
// folder, each replaced whole so a reader never sees half of one. A file
// of that name that edgepipe did not write is left alone: the error is a
// *ForeignReportError naming it, and the other report is still written.
func WriteReports(outDir string, r report.Report) error {
	page, err := report.HTML(r)
	if err != nil {
		return err
	}
	var foreign []string
	for _, f := range []struct {
		name string
		body []byte
	}{{reportHTML, page}, {reportMarkdown, report.Markdown(r)}} {
		path := filepath.Join(outDir, f.name)
		if !ours(path) {
			foreign = append(foreign, path)
			continue
		}
		if err := atomicfile.WriteMkdir(path, f.body, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	if len(foreign) > 0 {
		return &ForeignReportError{Paths: foreign}
	}
	return nil
}

// ForeignReportError names report files in the output folder that
// edgepipe did not write, and so did not replace.
type ForeignReportError struct{ Paths []string }

func (e *ForeignReportError) Error() string {
	return fmt.Sprintf("%s: not a report edgepipe wrote, so it was left alone; move it away to get this run's report there", strings.Join(e.Paths, ", "))
}

// ours reports whether path is absent or a report edgepipe wrote (its
// first bytes say so).
func ours(path string) bool {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	return bytes.HasPrefix(head, []byte(report.MarkdownHeading)) || bytes.Contains(head, []byte(report.HTMLTitle))
}
