package runreport

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/report"
	"github.com/edgepipe/edgepipe/steps"
)

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A target whose gate failed shows the size of the model it refused,
// where that model is in the cache, the logs of the steps that made and
// judged it and what those steps noted; a blocked one the log of the
// step that failed.
func TestReportRejectedModel(t *testing.T) {
	s := llmScenario(t)
	cache := t.TempDir()
	modelDir := filepath.Join(cache, "q8")
	writeFile(t, filepath.Join(modelDir, "model-q8_0.gguf"), "0123456789")
	quantizeLog := writeFile(t, filepath.Join(modelDir, steps.LogFile), "quantized\n")
	pplLog := writeFile(t, filepath.Join(cache, "logs", "perplexity_q8_0.log"), "ppl 13\n")
	s.res.Outputs["gguf-quantize:q8_0"] = &steps.Output{StepID: "gguf-quantize:q8_0", Dir: modelDir, Key: "k8", LogPath: quantizeLog,
		Files: []digest.FileDigest{{Path: "model-q8_0.gguf", Size: 10}, {Path: steps.LogFile, Size: 10}},
		Result: &steps.Result{Files: map[string]string{"model": "model-q8_0.gguf"},
			Facts: map[string]string{"fallbacks": "3 of 9 tensors required fallback quantization; 3 x q8_0->f16", "backend": "cpu"}}}
	s.res.Outputs["perplexity:q8_0"] = &steps.Output{StepID: "perplexity:q8_0", LogPath: pplLog, Result: &steps.Result{}}
	s.res.Gates["b"].Step = "perplexity:q8_0"
	r := s.rec.Report(s.rec.Outcomes(s.res), s.res, 3, "a quality gate failed")
	b := r.Targets[1]
	if b.SizeBytes != 10 || b.Rejected != filepath.Join(modelDir, "model-q8_0.gguf") || b.RejectedStep != "gguf-quantize:q8_0" ||
		!reflect.DeepEqual(b.StepLogs, []report.StepLog{{Step: "gguf-quantize:q8_0", Path: quantizeLog}, {Step: "perplexity:q8_0", Path: pplLog}}) {
		t.Errorf("b: size %d, rejected %q (%s), logs %v", b.SizeBytes, b.Rejected, b.RejectedStep, b.StepLogs)
	}
	want := []report.Note{{Step: "gguf-quantize:q8_0", Text: "backend: cpu; fallbacks: 3 of 9 tensors required fallback quantization; 3 x q8_0->f16"}}
	if !reflect.DeepEqual(b.Notes, want) {
		t.Errorf("b's notes %+v, want %+v", b.Notes, want)
	}
	// The size is the rejected model's; the outcome stays unpublished.
	if o := s.rec.Outcomes(s.res)[1]; o.SizeBytes != 0 {
		t.Errorf("the outcome of b has size %d: nothing was published", o.SizeBytes)
	}
	d := r.Targets[3]
	if !reflect.DeepEqual(d.FailedSteps, []string{"gguf-quantize:q4_0"}) || !reflect.DeepEqual(d.StepLogs, []report.StepLog{{Step: "gguf-quantize:q4_0", Path: s.log}}) || d.Rejected != "" {
		t.Errorf("d: failed steps %v, logs %v, rejected %q", d.FailedSteps, d.StepLogs, d.Rejected)
	}
	// Both reports say it.
	md := string(report.Markdown(r))
	for _, w := range []string{"rejected model (10 B), kept in the cache: `" + b.Rejected + "`", "`perplexity:q8_0`: `" + pplLog + "`",
		"read the log of gguf-quantize:q4_0: " + s.log} {
		if !strings.Contains(md, w) {
			t.Errorf("report.md lacks %q", w)
		}
	}
}

// A model the cache no longer holds has no size or path; a check that
// refused the target (not its perplexity) and the earlier folder a gate
// failure left in place are named.
func TestReportRejectedCheck(t *testing.T) {
	s := llmScenario(t)
	earlier := filepath.Join(s.out, "b")
	s.res.Outputs["gguf-quantize:q8_0"] = &steps.Output{Dir: filepath.Join(t.TempDir(), "evicted"), Files: []digest.FileDigest{{Path: "m", Size: 5}}}
	s.res.Gates["b"] = &publish.GateResult{Target: "b", Baseline: 10, Converted: 10.1, Delta: 0.1, WarnDelta: 0.5, MaxDelta: 2, Verdict: manifest.VerdictExcellent}
	s.res.Failed[0] = &publish.GateError{Target: "b", Check: &steps.Check{Name: "decode", Detail: "3 tok/s under 10"}, Step: "bench:x", Earlier: earlier}
	b := s.rec.Report(s.rec.Outcomes(s.res), s.res, 3, "").Targets[1]
	if b.SizeBytes != 0 || b.Rejected != "" || b.Check != `check "decode" of step bench:x failed: 3 tok/s under 10` || b.CheckStep != "bench:x" || b.StaleFolder != earlier {
		t.Errorf("b: size %d, rejected %q, check %q, stale %q", b.SizeBytes, b.Rejected, b.Check, b.StaleFolder)
	}
}

// What a published manifest's steps noted is shown per target, without
// the source step's (the source note says what matters of it) and the
// stand-in remark the Tools column already makes.
func TestReportNotesFromManifest(t *testing.T) {
	s := llmScenario(t)
	dir := filepath.Join(s.out, "a")
	publishFolder(t, dir, "a", map[string]string{"model.gguf": "w"}, manifest.Manifest{
		Source: manifest.Source{URI: "x", Quantized: &manifest.SourceQuantization{Format: "gguf", Type: "Q4_K_M", TensorTypes: "Q4_K:27 Q6_K:9"}},
		Steps: []manifest.Step{
			{ID: plan.SourceStepID, Kind: "fetch", CacheKey: "k0", Note: "hf_snapshot: /home/me/snap"},
			{ID: "gguf-quantize:q4_k_m", Kind: "gguf-quantize", CacheKey: "k1", StandIn: true,
				Note: "ran with a stand-in tool, not the real one; fallbacks: 180 of 272 tensors required fallback quantization; 150 x q4_K->q5_0"},
			{ID: "perplexity:q4_k_m", Kind: "perplexity", CacheKey: "k2", StandIn: true, Note: "ran with a stand-in tool, not the real one"},
			{ID: "contract:gguf-quantize:q4_k_m", Kind: "contract", CacheKey: "k3", Note: "chat_template: applied"},
		}})
	r := s.rec.Report(s.rec.Outcomes(s.res), s.res, 3, "")
	want := []report.Note{
		{Step: "gguf-quantize:q4_k_m", Text: "fallbacks: 180 of 272 tensors required fallback quantization; 150 x q4_K->q5_0"},
		{Step: "contract:gguf-quantize:q4_k_m", Text: "chat_template: applied"},
	}
	if got := r.Targets[0].Notes; !reflect.DeepEqual(got, want) {
		t.Errorf("notes %+v, want %+v", got, want)
	}
	if r.SourceNote != "The source was already quantized (gguf Q4_K_M; tensors Q4_K:27 Q6_K:9): every artifact inherits that rounding on top of its own." {
		t.Errorf("source note %q", r.SourceNote)
	}
	// The summary repeats the fallback note.
	if sum := r.Summary(); len(sum.Ship) != 1 || !reflect.DeepEqual(sum.Ship[0].Notes, []string{"180 of 272 tensors required fallback quantization (gguf-quantize:q4_k_m)"}) {
		t.Errorf("summary %+v", sum.Ship)
	}
	// From this run's source step when it ran.
	s.res.Outputs[plan.SourceStepID].Result.Facts = map[string]string{"source_format": "gguf", "source_quantization": "Q8_0"}
	if got := s.rec.Report(s.rec.Outcomes(s.res), s.res, 3, "").SourceNote; !strings.HasPrefix(got, "The source was already quantized (gguf Q8_0)") {
		t.Errorf("source note from the source step %q", got)
	}
}

// After run --target, the targets of the recipe this run did not build
// but an earlier run of the recipe published into the output folder stay
// in the report, in recipe order, marked as earlier with their date; a
// folder of another recipe or target, or one without a manifest, is not
// one of them.
func TestReportKeepsEarlierTargets(t *testing.T) {
	full := loadPlan(t, llmRecipe)
	sel, err := plan.Select(full, []string{"b"})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	publishFolder(t, filepath.Join(out, "a"), "a", map[string]string{"model.gguf": "w", "logs/q.log": "ok"}, manifest.Manifest{
		Created: created, Recipe: manifest.Recipe{Name: "llm"}, Target: manifest.Target{Device: "x86-laptop", Format: "gguf-q4_k_m"},
		Metrics: manifest.Metrics{SizeBytes: ptr[int64](1 << 20), Perplexity: &manifest.Perplexity{Baseline: 10, Converted: 10.2, Delta: 0.2, Ratio: 1.02,
			WarnDelta: 0.5, MaxDelta: 2, Verdict: manifest.VerdictExcellent}}})
	publishFolder(t, filepath.Join(out, "c"), "c", map[string]string{"m": "w"}, manifest.Manifest{Recipe: manifest.Recipe{Name: "other"}})
	publishFolder(t, filepath.Join(out, "e"), "x", map[string]string{"m": "w"}, manifest.Manifest{Recipe: manifest.Recipe{Name: "llm"}})
	writeFile(t, filepath.Join(out, "d", "model.gguf"), "no manifest")
	publishFolder(t, filepath.Join(out, "b"), "b", map[string]string{"model.gguf": "w8"}, manifest.Manifest{Recipe: manifest.Recipe{Name: "llm"},
		Metrics: manifest.Metrics{SizeBytes: ptr[int64](2)}})
	res := &engine.RunResult{Published: map[string]string{"b": filepath.Join(out, "b")}, Outputs: map[string]*steps.Output{}}

	rec := New(sel)
	rec.OutDir = out
	r := rec.Report(rec.Outcomes(res), res, 0, "ok")
	if len(r.Targets) != 1 {
		t.Fatalf("without AllTargets: %d targets, want b alone", len(r.Targets))
	}
	rec.AllTargets = full.TargetNames()
	r = rec.Report(rec.Outcomes(res), res, 0, "ok")
	var names []string
	for _, tg := range r.Targets {
		names = append(names, tg.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b"}) || r.Published != 1 {
		t.Fatalf("targets %v, published %d; want a (earlier) and b, 1 published by this run", names, r.Published)
	}
	a, b := r.Targets[0], r.Targets[1]
	if !a.Earlier || !a.PublishedAt.Equal(created) || a.Outcome != report.OutcomePublished || a.Verdict != "excellent" || a.Format != "gguf-q4_k_m" ||
		a.Device != "x86-laptop" || a.SizeBytes != 1<<20 || a.Perplexity == nil || a.Perplexity.Delta != 0.2 ||
		a.Manifest != "a/manifest.json" || !reflect.DeepEqual(a.Logs, []string{"a/logs/q.log"}) {
		t.Errorf("a: %+v", a)
	}
	if b.Earlier || b.Outcome != report.OutcomePublished {
		t.Errorf("b: %+v", b)
	}
	if got := r.PublishedLine(); !strings.HasPrefix(got, "1 of 1 targets this run built published, and 1 published by an earlier run is still in the output folder") {
		t.Errorf("published line %q", got)
	}
}
