package runreport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/getter"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/pipelines/shared"

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
// outputs when nothing was published), its bench, stand-in steps and the
// notes its steps recorded; for a target that was not published, where
// its rejected model and its logs are. After run --target, the targets
// of the recipe the run did not build but an earlier run published into
// the output folder are in it too, marked so.
func (c *Recorder) Report(outcomes []Outcome, res *engine.RunResult, code int, exitText string) report.Report {
	r := report.Report{Recipe: c.plan.Recipe.Name, ExitCode: code, ExitText: exitText,
		Date: c.started, Version: c.Version, Source: getter.Redact(c.plan.Recipe.Model.Source)}
	var srcFacts map[string]string
	if res != nil {
		if src := res.Outputs[plan.SourceStepID]; src != nil && src.Result != nil {
			r.Revision = src.Result.Revision
			srcFacts = src.Result.Facts
		}
	}
	r.SourceNote = sourceNote(srcFacts[shared.FactSourceFormat], srcFacts[shared.FactSourceQuantization], srcFacts[shared.FactSourceTensorTypes])
	built := map[string]bool{}
	for _, o := range outcomes {
		built[o.Target] = true
		t := report.Target{Name: o.Target, Format: o.Format, Device: o.Device, Outcome: o.Outcome,
			Verdict: o.Verdict, Artifact: o.Artifact, Pushed: o.Pushed, PushFailed: o.PushFailed, SizeBytes: o.SizeBytes, Error: o.Error, StoppedBy: o.StoppedBy,
			FailedSteps: o.FailedSteps}
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
			c.fromManifest(&t, res.Published[o.Target], m)
			if r.Revision == "" {
				r.Revision = m.Source.ResolvedRevision
			}
			if r.SourceNote == "" {
				r.SourceNote = quantizedNote(m.Source.Quantized)
			}
		} else {
			t.Bench, t.BenchStandIn = engine.TargetBench(c.plan, res, o.Target)
			t.StandIns = engine.TargetStandIns(c.plan, res, o.Target)
			t.Notes = c.outputNotes(res, o.Target)
			c.rejected(&t, o, res)
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
	r.Targets = c.withEarlier(r.Targets, built, &r)
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

// fromManifest fills what a published target's manifest records: links
// to it and its logs, metrics, stand-in steps and the steps' notes.
func (c *Recorder) fromManifest(t *report.Target, dir string, m *manifest.Manifest) {
	t.Manifest, t.Logs = links(c.OutDir, dir, m)
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
		if st.ID == plan.SourceStepID {
			continue // what matters of it is the report's SourceNote
		}
		if note := stepNote(st.Note); note != "" {
			t.Notes = append(t.Notes, report.Note{Step: st.ID, Text: note})
		}
	}
}

// standInNote starts the manifest note of a step a stand-in ran (package
// publish writes it); the reports mark stand-ins on their own.
const standInNote = "ran with a stand-in tool, not the real one"

// stepNote is a manifest step's note without its stand-in remark.
func stepNote(note string) string {
	note = strings.TrimPrefix(note, standInNote)
	return strings.TrimPrefix(note, "; ")
}

// outputNotes are the facts this run's steps of a target recorded, as
// its manifest would have kept them (a target that was not published
// has none): one note per step, in plan order.
func (c *Recorder) outputNotes(res *engine.RunResult, target string) []report.Note {
	if res == nil {
		return nil
	}
	var notes []report.Note
	for _, s := range c.plan.Steps {
		if s.Kind == "publish" || s.ID == plan.SourceStepID || !slices.Contains(s.Targets, target) {
			continue
		}
		out := res.Outputs[s.ID]
		if out == nil || out.Result == nil || len(out.Result.Facts) == 0 {
			continue
		}
		keys := make([]string, 0, len(out.Result.Facts))
		for k := range out.Result.Facts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+": "+out.Result.Facts[k])
		}
		notes = append(notes, report.Note{Step: s.ID, Text: strings.Join(parts, "; ")})
	}
	return notes
}

// rejected fills, for a target that was not published, where what the
// run made of it is: the model its gate refused (its step's output in
// the cache) with its size, and the logs of the steps that made and
// judged it or that failed.
func (c *Recorder) rejected(t *report.Target, o Outcome, res *engine.RunResult) {
	if res == nil {
		return
	}
	logs := map[string]bool{}
	addLog := func(step, path string) {
		if path == "" || logs[path] {
			return
		}
		if _, err := os.Stat(path); err != nil {
			return
		}
		logs[path] = true
		t.StepLogs = append(t.StepLogs, report.StepLog{Step: step, Path: RelPath(path)})
	}
	outLog := func(id string) {
		if out := res.Outputs[id]; out != nil {
			addLog(id, out.LogPath)
		}
	}
	switch o.Outcome {
	case OutcomeGateFailed:
		pub, ok := c.plan.Step(plan.PublishStepID(o.Target))
		if !ok || len(pub.Needs) == 0 {
			return
		}
		if out := res.Outputs[pub.Needs[0]]; out != nil && out.Dir != "" {
			if _, err := os.Stat(out.Dir); err == nil {
				var size int64
				for _, f := range out.ContentFiles() {
					size += f.Size
				}
				t.SizeBytes = size
				path := out.Dir
				if out.Result != nil && out.Result.Files["model"] != "" {
					path = filepath.Join(out.Dir, filepath.FromSlash(out.Result.Files["model"]))
				}
				t.Rejected, t.RejectedStep = RelPath(path), pub.Needs[0]
			}
		}
		outLog(pub.Needs[0])
		if g := o.Gate; g != nil {
			outLog(g.Step)
		}
		if a := o.Accuracy; a != nil {
			outLog(a.Step)
		}
		if a := o.Agreement; a != nil {
			outLog(a.Step)
		}
		if ge := gateErrorFor(res, o.Target); ge != nil {
			if ge.Check != nil {
				t.Check = fmt.Sprintf("check %q of step %s failed: %s", ge.Check.Name, ge.Step, ge.Check.Detail)
				t.CheckStep = ge.Step
				outLog(ge.Step)
			}
			if ge.Earlier != "" {
				t.StaleFolder = RelPath(ge.Earlier)
			}
		}
	case OutcomeBlocked:
		for _, id := range o.FailedSteps {
			c.mu.Lock()
			rec := c.steps[id]
			c.mu.Unlock()
			if rec != nil {
				addLog(id, rec.log)
			}
			for _, err := range res.Failed {
				var se *engine.StepError
				if errors.As(err, &se) && se.Step == id {
					addLog(id, se.LogPath)
				}
			}
		}
	}
}

// withEarlier adds, in recipe order, the targets of the recipe this run
// did not build (run --target chose others) whose folder in the output
// folder holds a manifest.json an earlier run of this recipe published
// for them.
func (c *Recorder) withEarlier(targets []report.Target, built map[string]bool, r *report.Report) []report.Target {
	if c.OutDir == "" || len(c.AllTargets) == 0 {
		return targets
	}
	byName := map[string]report.Target{}
	for _, t := range targets {
		byName[t.Name] = t
	}
	var out []report.Target
	added := false
	for _, name := range c.AllTargets {
		if built[name] {
			out = append(out, byName[name])
			delete(byName, name)
			continue
		}
		dir := filepath.Join(c.OutDir, name)
		m, err := manifest.Read(dir)
		if err != nil || m.Target.Name != name || m.Recipe.Name != c.plan.Recipe.Name {
			continue
		}
		t := report.Target{Name: name, Format: m.Target.Format, Device: m.Target.Device, Outcome: report.OutcomePublished,
			Artifact: RelPath(dir), Earlier: true, PublishedAt: m.Created}
		if m.Metrics.SizeBytes != nil {
			t.SizeBytes = *m.Metrics.SizeBytes
		}
		if p := m.Metrics.Perplexity; p != nil {
			t.Verdict = p.Verdict
			t.Perplexity = &report.Perplexity{Baseline: p.Baseline, Converted: p.Converted, Delta: p.Delta,
				WarnDelta: p.WarnDelta, MaxDelta: p.MaxDelta, DeltaCI95: p.DeltaCI95}
		}
		if a := m.Metrics.Agreement; a != nil {
			t.Verdict = a.Verdict
			t.Agreement = &report.AgreementGate{Agreement: a.Agreement, Min: a.Min}
		}
		if a := m.Metrics.Accuracy; a != nil {
			if t.Verdict == "" || a.Verdict == manifest.VerdictFail {
				t.Verdict = a.Verdict
			}
			t.Accuracy = &report.Accuracy{Reference: a.Reference, Converted: a.Converted, Drop: a.Drop, MaxDrop: a.MaxDrop}
		}
		c.fromManifest(&t, dir, m)
		t.Generation, t.VisionBench = m.Metrics.Generation, m.Metrics.VisionBench
		if r.SourceNote == "" {
			r.SourceNote = quantizedNote(m.Source.Quantized)
		}
		out = append(out, t)
		added = true
	}
	if !added {
		return targets
	}
	// Targets the recipe's list does not name (none, unless the caller
	// set AllTargets from another plan) keep their place at the end.
	for _, t := range targets {
		if _, ok := byName[t.Name]; ok {
			out = append(out, t)
		}
	}
	return out
}

// sourceNote says what every artifact inherits from a quantized source.
func sourceNote(format, typ, tensors string) string {
	if format == "" {
		return ""
	}
	what := format
	if typ != "" {
		what += " " + typ
	}
	if tensors != "" {
		what += "; tensors " + tensors
	}
	return "The source was already quantized (" + what + "): every artifact inherits that rounding on top of its own."
}

func quantizedNote(q *manifest.SourceQuantization) string {
	if q == nil {
		return ""
	}
	return sourceNote(q.Format, q.Type, q.TensorTypes)
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
