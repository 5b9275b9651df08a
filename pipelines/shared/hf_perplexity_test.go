package shared

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/pplstat"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps"
)

func pplGolden(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("python", "reports", "hf_perplexity.json"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// The baseline step scores the source checkpoint with hf_perplexity.py,
// keeping every token's score and its top tokens for the converted
// models' intervals and KL divergences.
func TestHFPerplexityRun(t *testing.T) {
	src := steps.Input{StepID: "source", Kind: "fetch", Dir: "/cache/source"}
	f := newFakeStep(t, &steps.Eval{Chunk: 512, MaxChunks: 47}, steps.Input{StepID: "other", Kind: "gguf-convert"}, src)
	f.data[steps.DataEval] = "/data/eval.txt"
	golden := pplGolden(t)
	f.tool = func([]string) error { f.print(t, "scoring chunk 47/47", golden); return nil }
	if err := HFPerplexity.Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/" + toolchain.ToolHFPPL, "--model", "/cache/source", "--text", "/data/eval.txt", "--ctx", "512", "--chunks", "47",
		"--scores-out", f.sc.Out, "--keep-topk"}
	if len(f.argv) != 1 || !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q\nwant %q", f.argv, want)
	}
	p := f.sc.Result.Perplexity
	if p == nil || p.PPL != 17.5127 || p.EvalTokens != 12032 || p.Chunks != 47 || p.Context != 512 || p.Backend != "transformers" ||
		p.Baseline != 0 || p.KLDivergence == nil || *p.KLDivergence != 0.0183 || p.Top1Agreement == nil || *p.Top1Agreement != 0.9512 {
		t.Errorf("perplexity %+v", p)
	}

	// Without the source step among its inputs it says what it lacks.
	f = newFakeStep(t, &steps.Eval{Chunk: 512}, steps.Input{StepID: "other", Kind: "gguf-convert"})
	if err := HFPerplexity.Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), `needs an input from a "fetch" step`) {
		t.Errorf("no source: %v", err)
	}
}

func TestRunTransformersPerplexity(t *testing.T) {
	ev := steps.Eval{Chunk: 256}
	for _, tc := range []struct {
		name    string
		ev      steps.Eval
		noData  bool
		toolErr error
		lines   []string
		wantErr string
		argv    []string
	}{
		{name: "every chunk", ev: ev, lines: []string{`{"add_bos": false, "chunks": 3, "ctx": 256, "kl_divergence": null, "ppl": 9.5, "scored": 384, "tokens": 800, "top1_agreement": null}`},
			argv: []string{"/opt/tools/t.py", "--model", "/m", "--text", "/data/eval.txt", "--ctx", "256", "--extra"}},
		{name: "no text", ev: ev, noData: true, wantErr: "the recipe has no eval data"},
		{name: "tool fails", ev: ev, toolErr: errors.New("exit status 1"), wantErr: "exit status 1"},
		{name: "no report", ev: ev, lines: []string{"Traceback ..."}, wantErr: "no JSON result line"},
		{name: "report of another shape", ev: ev, lines: []string{`{"ppl": 9.5}`}, wantErr: "does not match what edgepipe reads"},
		{name: "zero", ev: ev, lines: []string{`{"add_bos": false, "chunks": 3, "ctx": 256, "kl_divergence": null, "ppl": 0, "scored": 384, "tokens": 800, "top1_agreement": null}`},
			wantErr: "t.py reported perplexity 0: the model produces no usable probabilities"},
		{name: "negative", ev: ev, lines: []string{`{"add_bos": false, "chunks": 3, "ctx": 256, "kl_divergence": null, "ppl": -1, "scored": 384, "tokens": 800, "top1_agreement": null}`},
			wantErr: "reported perplexity -1"},
	} {
		f := newFakeStep(t, &tc.ev)
		if !tc.noData {
			f.data[steps.DataEval] = "/data/eval.txt"
		}
		f.tool = func([]string) error {
			f.print(t, tc.lines...)
			return tc.toolErr
		}
		res, err := RunTransformersPerplexity(context.Background(), f.sc, tc.ev, "t.py", "/m", "--extra")
		if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
			continue
		}
		if tc.argv != nil && (len(f.argv) != 1 || !slices.Equal(f.argv[0], tc.argv)) {
			t.Errorf("%s: argv %q\nwant %q", tc.name, f.argv, tc.argv)
		}
		if err == nil && (res.PPL != 9.5 || res.Scored != 384 || res.Chunks != 3) {
			t.Errorf("%s: report %+v", tc.name, res)
		}
		if tc.noData && len(f.argv) != 0 {
			t.Errorf("%s: the tool ran without its text", tc.name)
		}
	}
}

func TestTransformersPerplexity(t *testing.T) {
	kl, top1 := 0.1, 0.9
	p := TransformersPerplexity(report.Perplexity{PPL: 12, Tokens: 999, Chunks: 4, Ctx: 128, Scored: 256, KLDivergence: &kl, Top1Agreement: &top1}, "onnxruntime")
	if p.PPL != 12 || p.EvalTokens != 256 || p.Chunks != 4 || p.Context != 128 || p.Backend != "onnxruntime" || p.KLDivergence != &kl || p.Top1Agreement != &top1 {
		t.Errorf("%+v", p)
	}
}

func baselineInput(t *testing.T, nll []float64) steps.Input {
	t.Helper()
	dir := t.TempDir()
	if nll != nil {
		if err := pplstat.WriteNLL(filepath.Join(dir, pplstat.NLLFile), nll); err != nil {
			t.Fatal(err)
		}
	}
	return steps.Input{StepID: "hf-perplexity", Kind: "hf-perplexity", Dir: dir,
		Result: &steps.Result{Perplexity: &steps.Perplexity{PPL: 10, Chunks: 4, Context: 128}}}
}

func nllOut(t *testing.T, nll []float64) string {
	t.Helper()
	dir := t.TempDir()
	if err := pplstat.WriteNLL(filepath.Join(dir, pplstat.NLLFile), nll); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAgainstBaseline(t *testing.T) {
	base := baselineInput(t, nil)
	kl := 0.02
	s := Scored{PPL: 11, Tokens: 256, Chunks: 4, Ctx: 128, KLDivergence: &kl}
	p, err := AgainstBaseline(base, "onnx_ppl.py", "/log", s, "onnxruntime")
	if err != nil {
		t.Fatal(err)
	}
	if p.PPL != 11 || p.Baseline != 10 || p.EvalTokens != 256 || p.Chunks != 4 || p.Context != 128 || p.Backend != "onnxruntime" ||
		p.KLDivergence != &kl || p.Top1Agreement != nil || p.DeltaLow != nil || p.Interval != "" {
		t.Errorf("%+v", p)
	}

	for _, tc := range []struct {
		name    string
		ppl     float64
		chunks  int
		ctx     int
		base    *steps.Perplexity
		wantErr string
	}{
		{"zero", 0, 4, 128, base.Result.Perplexity, "onnx_ppl.py reported perplexity 0: the model produces no usable probabilities (see /log)"},
		{"NaN", math.NaN(), 4, 128, base.Result.Perplexity, "reported perplexity NaN"},
		{"infinite", math.Inf(1), 4, 128, base.Result.Perplexity, "reported perplexity +Inf"},
		{"negative", -3, 4, 128, base.Result.Perplexity, "reported perplexity -3"},
		{"no baseline", 11, 4, 128, nil, "the baseline step hf-perplexity recorded no perplexity"},
		{"other chunks", 11, 5, 128, base.Result.Perplexity, "the baseline hf-perplexity scored 4 chunks of 128 tokens, this model 5 of 128: they do not compare"},
		{"other context", 11, 4, 256, base.Result.Perplexity, "this model 4 of 256"},
	} {
		b := base
		b.Result = &steps.Result{Perplexity: tc.base}
		_, err := AgainstBaseline(b, "onnx_ppl.py", "/log", Scored{PPL: tc.ppl, Chunks: tc.chunks, Ctx: tc.ctx}, "onnxruntime")
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

// With both steps' per-token scores the delta gets its paired interval;
// a converted model that kept none gets none, and a baseline that kept
// none while the model did is an error.
func TestAgainstBaselineInterval(t *testing.T) {
	baseNLL := make([]float64, 400)
	convNLL := make([]float64, 400)
	for i := range baseNLL {
		baseNLL[i] = 2 + 0.5*math.Sin(float64(i))
		convNLL[i] = baseNLL[i] + 0.05 + 0.01*math.Cos(float64(i))
	}
	base := baselineInput(t, baseNLL)
	s := Scored{PPL: pplstat.PPL(convNLL), Tokens: 400, Chunks: 4, Ctx: 128, Out: nllOut(t, convNLL)}
	p, err := AgainstBaseline(base, "q.py", "/log", s, "x")
	if err != nil {
		t.Fatal(err)
	}
	iv, err := pplstat.PairedDelta(baseNLL, convNLL)
	if err != nil {
		t.Fatal(err)
	}
	if p.DeltaLow == nil || p.DeltaHigh == nil || *p.DeltaLow != iv.Low || *p.DeltaHigh != iv.High || !(iv.Low < iv.Delta && iv.Delta < iv.High) {
		t.Fatalf("interval [%v, %v], want [%v, %v] around %v", p.DeltaLow, p.DeltaHigh, iv.Low, iv.High, iv.Delta)
	}
	if p.Interval != "paired bootstrap over 400 tokens (2000 resamples)" {
		t.Errorf("interval %q", p.Interval)
	}

	// The model kept no scores: no interval, no error.
	s.Out = t.TempDir()
	if p, err := AgainstBaseline(base, "q.py", "/log", s, "x"); err != nil || p.DeltaLow != nil || p.Interval != "" {
		t.Errorf("no scores: %+v, %v", p, err)
	}
	// The baseline kept none.
	s.Out = nllOut(t, convNLL)
	_, err = AgainstBaseline(baselineInput(t, nil), "q.py", "/log", s, "x")
	if err == nil || !strings.Contains(err.Error(), "q.py: the baseline step hf-perplexity kept no per-token scores to pair with") {
		t.Errorf("no baseline scores: %v", err)
	}
	// Scores of other tokens do not pair.
	s.Out = nllOut(t, convNLL[:399])
	_, err = AgainstBaseline(base, "q.py", "/log", s, "x")
	if err == nil || !strings.Contains(err.Error(), "do not pair") || !strings.Contains(err.Error(), "(baseline hf-perplexity)") {
		t.Errorf("unpaired: %v", err)
	}
	// A damaged file of the model's.
	s.Out = t.TempDir()
	if err := os.WriteFile(filepath.Join(s.Out, pplstat.NLLFile), []byte("odd"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := AgainstBaseline(base, "q.py", "/log", s, "x"); err == nil || !strings.Contains(err.Error(), "not a per-token score file") {
		t.Errorf("damaged: %v", err)
	}
}

func TestHFPerplexityKind(t *testing.T) {
	if got := HFPerplexity.Tools(&steps.Eval{}); !slices.Equal(got, []string{toolchain.ToolHFPPL}) {
		t.Errorf("tools %v", got)
	}
	if _, ok := HFPerplexity.NewParams().(*steps.Eval); !ok {
		t.Errorf("params %T", HFPerplexity.NewParams())
	}
	if k, ok := steps.Lookup("hf-perplexity"); !ok || k != HFPerplexity {
		t.Error("hf-perplexity is not registered")
	}
}
