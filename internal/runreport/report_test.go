package runreport

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/report"
	"github.com/edgepipe/edgepipe/steps"
)

// The report gathers each outcome with what its manifest or the run's
// outputs add, and one failure per root cause.
func TestReport(t *testing.T) {
	s := llmScenario(t)
	r := s.rec.Report(s.rec.Outcomes(s.res), s.res, 3, "a quality gate failed")
	if r.Recipe != "llm" || r.ExitCode != 3 || r.ExitText != "a quality gate failed" || r.Version != "1.2.3" ||
		r.Revision != "0123abcd" || r.Published != 1 || !r.Date.Equal(s.rec.started) {
		t.Errorf("header %+v", r)
	}
	if strings.Contains(r.Source, "hunter2") || !strings.Contains(r.Source, "example.com/m.gguf") {
		t.Errorf("source %q: want the URL without its password", r.Source)
	}
	if len(r.Targets) != 5 {
		t.Fatalf("%d targets, want 5", len(r.Targets))
	}
	a := r.Targets[0]
	if a.Name != "a" || a.Outcome != report.OutcomePublished || a.Verdict != "excellent" || a.SizeBytes != 3<<20 ||
		!reflect.DeepEqual(a.Pushed, []string{"oci://registry.example/llm:a@sha256:1111"}) || !reflect.DeepEqual(a.PushFailed, []string{"s3://bucket/llm/a"}) {
		t.Errorf("a: %+v", a)
	}
	if p := a.Perplexity; p == nil || *p != (report.Perplexity{Baseline: 10, Converted: 10.25, Delta: 0.25, WarnDelta: 0.5, MaxDelta: 2}) {
		t.Errorf("a's perplexity %+v", p)
	}
	// Links are relative to the reports' folder; only logs/ files are logs.
	if a.Manifest != "a/manifest.json" || !reflect.DeepEqual(a.Logs, []string{"a/logs/gguf-quantize_q4_k_m.log"}) {
		t.Errorf("a's links: manifest %q, logs %v", a.Manifest, a.Logs)
	}
	// From the manifest: it holds no bench, so the published report has
	// none, whatever the run's outputs held.
	if a.KLDivergence == nil || *a.KLDivergence != 0.03 || a.Bench != nil || a.StandIns != nil {
		t.Errorf("a's metrics: kl %v, bench %v, stand-ins %v", a.KLDivergence, a.Bench, a.StandIns)
	}
	b := r.Targets[1]
	if b.Outcome != report.OutcomeGateFailed || b.Verdict != "fail" || b.Perplexity == nil || b.Perplexity.Delta != 3 || b.Manifest != "" {
		t.Errorf("b: %+v", b)
	}
	if c := r.Targets[2]; c.StoppedBy != "gguf-quantize:q4_0" || c.Outcome != report.OutcomeNotRun {
		t.Errorf("c: %+v", c)
	}
	if d := r.Targets[3]; d.Outcome != report.OutcomeBlocked || d.Error != "not built: step gguf-quantize:q4_0 failed" {
		t.Errorf("d: %+v", d)
	}

	if len(r.Failures) != 2 {
		t.Fatalf("failures %+v, want the gate's and the step's", r.Failures)
	}
	gate, step := r.Failures[0], r.Failures[1]
	if gate.Subject != "b" || gate.Step || !strings.HasPrefix(gate.Message, "target b failed its quality gate") || gate.LogTail != nil {
		t.Errorf("gate failure %+v", gate)
	}
	// The step's first line only; the log's tail beside it.
	if step.Subject != "gguf-quantize:q4_0" || !step.Step || step.Message != "step gguf-quantize:q4_0 failed: llama-quantize exited with code 1" ||
		step.LogName != s.log || !reflect.DeepEqual(step.LogTail, []string{"loading model", "error: tensor blk.3 has no data"}) {
		t.Errorf("step failure %+v", step)
	}
}

// A failure that is neither a gate nor a step is reported as it is; a
// step whose log is gone has no tail.
func TestReportOtherFailures(t *testing.T) {
	s := llmScenario(t)
	res := &engine.RunResult{Published: map[string]string{}, Failed: []error{
		errors.New("interrupted"),
		&engine.StepError{Step: "source", LogPath: filepath.Join(t.TempDir(), "gone.log"), Err: errors.New("404\nbody")},
	}}
	r := s.rec.Report(s.rec.Outcomes(res), res, 130, "interrupted")
	want := []report.Failure{
		{Message: "interrupted"},
		{Subject: "source", Step: true, Message: "step source failed: 404"},
	}
	if !reflect.DeepEqual(r.Failures, want) {
		t.Errorf("failures %+v, want %+v", r.Failures, want)
	}
	if r.Revision != "" || r.Published != 0 {
		t.Errorf("revision %q, published %d: nothing ran", r.Revision, r.Published)
	}
}

// Without a result the report lists the targets, not run, and no failures.
func TestReportWithoutAResult(t *testing.T) {
	s := llmScenario(t)
	r := s.rec.Report(s.rec.Outcomes(nil), nil, 130, "interrupted")
	if len(r.Targets) != 5 || r.Failures != nil || r.Published != 0 || r.Revision != "" {
		t.Fatalf("%+v", r)
	}
	for _, tg := range r.Targets {
		if tg.Outcome != report.OutcomeNotRun || tg.Bench != nil || tg.StandIns != nil {
			t.Errorf("%s: %+v", tg.Name, tg)
		}
	}
}

// What a published target's manifest says wins over the run's outputs:
// its revision (when the source step did not run), stand-ins, bench and
// the top-1 agreement of either vision gate.
func TestReportFromManifest(t *testing.T) {
	s := llmScenario(t)
	out := t.TempDir()
	rec := New(s.pl)
	rec.OutDir = out
	bench := &manifest.Bench{Backend: "llama.cpp", TimedRuns: 5, DecodeTokens: 32, TokenP50MS: 80, TokenP95MS: 85, TokenP99MS: 90, DecodeTokS: 12}
	vb := &manifest.VisionBench{Runtime: "onnxruntime", TimedRuns: 10, Batch: 1, LatencyP50MS: 3, LatencyP95MS: 4, LatencyP99MS: 5,
		MeanMS: 3.2, ImagesPerS: 312, PeakRSSBytes: 80 << 20}
	for _, tc := range []struct {
		name    string
		metrics manifest.Metrics
		steps   []manifest.Step
		check   func(t *testing.T, tg report.Target)
	}{
		{"accuracy's agreement", manifest.Metrics{Top1Agreement: ptr(0.5), Accuracy: &manifest.Accuracy{Agreement: ptr(0.93)}},
			nil, func(t *testing.T, tg report.Target) {
				if tg.Top1Agreement == nil || *tg.Top1Agreement != 0.93 {
					t.Errorf("top-1 agreement %v, want the accuracy gate's 0.93", tg.Top1Agreement)
				}
			}},
		{"agreement gate's agreement", manifest.Metrics{Top1Agreement: ptr(0.5), Accuracy: &manifest.Accuracy{Agreement: ptr(0.93)}, Agreement: &manifest.Agreement{Agreement: 0.97}},
			nil, func(t *testing.T, tg report.Target) {
				if tg.Top1Agreement == nil || *tg.Top1Agreement != 0.97 {
					t.Errorf("top-1 agreement %v, want the agreement gate's 0.97", tg.Top1Agreement)
				}
			}},
		{"plain top-1 agreement", manifest.Metrics{Top1Agreement: ptr(0.5)},
			nil, func(t *testing.T, tg report.Target) {
				if tg.Top1Agreement == nil || *tg.Top1Agreement != 0.5 {
					t.Errorf("top-1 agreement %v, want 0.5", tg.Top1Agreement)
				}
			}},
		{"stand-ins", manifest.Metrics{Bench: bench, VisionBench: vb}, []manifest.Step{
			{ID: "gguf-quantize:q4_k_m", Kind: "gguf-quantize", StandIn: true, CacheKey: "k1"},
			{ID: "perplexity:q4_k_m", Kind: "perplexity", CacheKey: "k2"},
			{ID: "bench:gguf-quantize:q4_k_m", Kind: "bench", StandIn: true, CacheKey: "k3"},
		}, func(t *testing.T, tg report.Target) {
			if !reflect.DeepEqual(tg.StandIns, []string{"gguf-quantize:q4_k_m", "bench:gguf-quantize:q4_k_m"}) || !tg.BenchStandIn ||
				!reflect.DeepEqual(tg.Bench, bench) || !reflect.DeepEqual(tg.VisionBench, vb) {
				t.Errorf("stand-ins %v (bench %v), bench %+v, vision bench %+v", tg.StandIns, tg.BenchStandIn, tg.Bench, tg.VisionBench)
			}
		}},
		{"a stand-in that is not the bench", manifest.Metrics{Bench: bench}, []manifest.Step{
			{ID: "gguf-quantize:q4_k_m", Kind: "gguf-quantize", StandIn: true, CacheKey: "k1"},
			{ID: "bench:gguf-quantize:q4_k_m", Kind: "bench", CacheKey: "k3"},
		}, func(t *testing.T, tg report.Target) {
			if tg.BenchStandIn || !reflect.DeepEqual(tg.StandIns, []string{"gguf-quantize:q4_k_m"}) {
				t.Errorf("stand-ins %v, bench stand-in %v", tg.StandIns, tg.BenchStandIn)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(out, strings.ReplaceAll(tc.name, " ", "-"))
			publishFolder(t, dir, "a", map[string]string{"model.gguf": "w"},
				manifest.Manifest{Metrics: tc.metrics, Steps: tc.steps, Source: manifest.Source{URI: "x", ResolvedRevision: "feedbeef"}})
			res := &engine.RunResult{Published: map[string]string{"a": dir}}
			r := rec.Report([]Outcome{{Target: "a", Outcome: OutcomePublished}}, res, 0, "")
			if r.Revision != "feedbeef" {
				t.Errorf("revision %q, want the manifest's", r.Revision)
			}
			if len(r.Targets) != 1 {
				t.Fatalf("%d targets", len(r.Targets))
			}
			tc.check(t, r.Targets[0])
		})
	}
}

// A target that was not published takes its bench, stand-ins and vision
// bench from this run's outputs.
func TestReportFromOutputs(t *testing.T) {
	s := llmScenario(t)
	vb := &manifest.VisionBench{Runtime: "onnxruntime"}
	s.res.Outputs["bench:gguf-quantize:q4_k_m"].Result.StandIns = []string{"llama-bench"}
	res := &engine.RunResult{Published: map[string]string{}, Outputs: map[string]*steps.Output{
		"gguf-quantize:q4_k_m":       {Result: &steps.Result{StandIns: []string{"llama-quantize"}, VisionBench: vb}},
		"bench:gguf-quantize:q4_k_m": s.res.Outputs["bench:gguf-quantize:q4_k_m"],
		"gguf-quantize:q8_0":         {Result: &steps.Result{StandIns: []string{"llama-quantize"}}},
		plan.PublishStepID("a"):      {Result: &steps.Result{StandIns: []string{"x"}}},
	}}
	r := s.rec.Report([]Outcome{{Target: "a", Outcome: OutcomeGateFailed}}, res, 3, "")
	a := r.Targets[0]
	if a.Bench == nil || a.Bench.DecodeTokS != 41.5 || !a.BenchStandIn || a.VisionBench != vb || a.VisionBenchStandIn != true ||
		!reflect.DeepEqual(a.StandIns, []string{"gguf-quantize:q4_k_m", "bench:gguf-quantize:q4_k_m"}) {
		t.Errorf("a: bench %+v (stand-in %v), vision bench %v (stand-in %v), stand-ins %v", a.Bench, a.BenchStandIn, a.VisionBench, a.VisionBenchStandIn, a.StandIns)
	}
}

// Vision gates become the report's accuracy and agreement sections.
func TestReportVisionGates(t *testing.T) {
	s := llmScenario(t)
	o := Outcome{Target: "x", Outcome: OutcomeGateFailed,
		Accuracy:  &publish.AccuracyResult{Reference: 0.9, Converted: 0.85, Drop: 0.05, MaxDrop: 0.02, Verdict: "fail"},
		Agreement: &publish.AgreementResult{Agreement: 0.95, Min: 0.9, Verdict: "ok"}}
	tg := s.rec.Report([]Outcome{o}, nil, 3, "").Targets[0]
	if tg.Accuracy == nil || *tg.Accuracy != (report.Accuracy{Reference: 0.9, Converted: 0.85, Drop: 0.05, MaxDrop: 0.02}) ||
		tg.Agreement == nil || *tg.Agreement != (report.AgreementGate{Agreement: 0.95, Min: 0.9}) || tg.Perplexity != nil {
		t.Errorf("accuracy %+v, agreement %+v, perplexity %+v", tg.Accuracy, tg.Agreement, tg.Perplexity)
	}
}

func TestLinks(t *testing.T) {
	m := &manifest.Manifest{Files: []manifest.File{{Path: "README.md"}, {Path: "logs/a.log"}, {Path: "model/logs/not-a-log"}, {Path: "logs/b.log"}}}
	for _, tc := range []struct {
		name, out, dir, manifest string
		logs                     []string
	}{
		{"inside", "/run/out", "/run/out/llm/a", "llm/a/manifest.json", []string{"llm/a/logs/a.log", "llm/a/logs/b.log"}},
		{"beside", "/run/out", "/run/artifacts/a", "../artifacts/a/manifest.json", []string{"../artifacts/a/logs/a.log", "../artifacts/a/logs/b.log"}},
		{"no output folder", "", "/run/out/a", "", nil},
		{"relative and absolute", "out", "/run/out/a", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotM, gotLogs := links(tc.out, tc.dir, m)
			if gotM != tc.manifest || !reflect.DeepEqual(gotLogs, tc.logs) {
				t.Errorf("links(%q, %q) = %q, %v; want %q, %v", tc.out, tc.dir, gotM, gotLogs, tc.manifest, tc.logs)
			}
		})
	}
}

// Both reports are written; each replaces an earlier one edgepipe wrote.
func TestWriteReports(t *testing.T) {
	s := llmScenario(t)
	r := s.rec.Report(s.rec.Outcomes(s.res), s.res, 3, "a quality gate failed")
	dir := filepath.Join(t.TempDir(), "new", "out")
	for range 2 { // the second time over the first's files
		if err := WriteReports(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || string(md) != string(report.Markdown(r)) {
		t.Errorf("report.md (%v) is not the report's Markdown", err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	want, _ := report.HTML(r)
	if err != nil || string(page) != string(want) {
		t.Errorf("report.html (%v) is not the report's HTML", err)
	}
	if got := ReportPaths(dir); !reflect.DeepEqual(got, []string{filepath.Join(dir, "report.html"), filepath.Join(dir, "report.md")}) {
		t.Errorf("ReportPaths = %v", got)
	}
	if got := ReportPaths(t.TempDir()); got != nil {
		t.Errorf("ReportPaths of an empty folder = %v", got)
	}
}

// A file of a report's name that edgepipe did not write is left alone and
// named in the error; the other report is still written.
func TestWriteReportsLeavesForeignFiles(t *testing.T) {
	s := llmScenario(t)
	r := s.rec.Report(nil, nil, 0, "")
	dir := t.TempDir()
	foreign := filepath.Join(dir, "report.md")
	if err := os.WriteFile(foreign, []byte("# my notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteReports(dir, r)
	var fe *ForeignReportError
	if !errors.As(err, &fe) || !reflect.DeepEqual(fe.Paths, []string{foreign}) {
		t.Fatalf("err = %v, want a ForeignReportError naming %s", err, foreign)
	}
	if !strings.Contains(err.Error(), foreign+": not a report edgepipe wrote") || !strings.Contains(err.Error(), "move it away") {
		t.Errorf("the error does not say what to do: %v", err)
	}
	if got, _ := os.ReadFile(foreign); string(got) != "# my notes\n" {
		t.Errorf("the foreign file was changed: %q", got)
	}
	if page, err := os.ReadFile(filepath.Join(dir, "report.html")); err != nil || !strings.Contains(string(page), report.HTMLTitle) {
		t.Errorf("report.html was not written beside it: %v", err)
	}
}

func TestOurs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	page := "<!doctype html>\n<html><head>" + report.HTMLTitle + "x</title>"
	for _, tc := range []struct {
		name string
		path string
		want bool
	}{
		{"absent", filepath.Join(dir, "absent.md"), true},
		{"our Markdown", write("ours.md", report.MarkdownHeading+"llm\n\nbody"), true},
		{"our HTML", write("ours.html", page), true},
		{"our title past the first 4 KiB", write("late.html", strings.Repeat(" ", 4096)+page), false},
		{"the heading not first", write("quoted.md", "notes\n"+report.MarkdownHeading), false},
		{"someone else's", write("theirs.md", "# notes\n"), false},
		{"empty", write("empty.md", ""), false},
		{"a folder", func() string { p := filepath.Join(dir, "folder"); os.Mkdir(p, 0o755); return p }(), false},
		{"under a file", filepath.Join(write("file", "x"), "report.md"), false},
	} {
		if got := ours(tc.path); got != tc.want {
			t.Errorf("%s: ours = %v, want %v", tc.name, got, tc.want)
		}
	}
}
