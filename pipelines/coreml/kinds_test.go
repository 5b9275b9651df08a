package coreml

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/pplstat"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// fakeStep is a steps.Context whose tools are not run: Exec records each
// argv and writes report (a helper's report line) to the step's log, as
// the helper would.
func fakeStep(t *testing.T, params any, inputs []steps.Input, report []byte) (*steps.Context, *[][]string) {
	t.Helper()
	dir := t.TempDir()
	var argvs [][]string
	sc := &steps.Context{StepID: "step", Params: params, Inputs: inputs, Out: filepath.Join(dir, "out"),
		Scratch: filepath.Join(dir, "scratch"), Log: &bytes.Buffer{}, Result: &steps.Result{},
		LogPath: filepath.Join(dir, "step.log"), Threads: 3,
		Tool: func(name string) ([]string, error) { return []string{"/tools/python", name}, nil },
		Data: func(role string) (string, error) { return "/data/" + role + ".txt", nil },
		Exec: func(_ context.Context, argv, _ []string) error {
			argvs = append(argvs, argv)
			return os.WriteFile(filepath.Join(dir, "step.log"), append([]byte("progress\n"), append(bytes.TrimSpace(report), '\n')...), 0o644)
		}}
	return sc, &argvs
}

func golden(t *testing.T, helper string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("python", "reports", strings.TrimSuffix(helper, ".py")+".json"))
	if err != nil {
		t.Fatal(err)
	}
	// The report is one line of the log.
	var line bytes.Buffer
	if err := json.Compact(&line, b); err != nil {
		t.Fatal(err)
	}
	return line.Bytes()
}

var source = steps.Input{StepID: "source", Kind: shared.Fetch.Name(), Dir: "/cache/source"}

func TestConvertArgvAndFacts(t *testing.T) {
	p := &ConvertParams{Context: 4096, KVCache: "stateful", Weights: Weights{BlockSize: 32, Mode: ModeAffine, VDownBits: 8}}
	sc, argvs := fakeStep(t, p, []steps.Input{source}, golden(t, ToolCoreMLConvert))
	if err := (coremlConvert{}).Run(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/tools/python", ToolCoreMLConvert, "--model", "/cache/source", "--out", filepath.Join(sc.Out, CoreMLPackage),
		"--context", "4096", "--kv-cache", "stateful", "--threads", "3", "--block-size", "32", "--mode", "affine", "--v-down-bits", "8"}
	if len(*argvs) != 1 || !slices.Equal((*argvs)[0], want) {
		t.Fatalf("argv %q\nwant %q", *argvs, want)
	}
	r := sc.Result
	for fact, want := range map[string]string{
		"kv_cache":       "stateful (KV cache as Core ML state (iOS 18), written in place by slice updates)",
		"inputs":         "input_ids, causal_mask, sliding_mask",
		"sliding_window": "512 tokens: the sliding-attention layers read the sliding_mask input",
		"coremltools":    "9.0 (torch 2.7.0)",
		"v_down":         "36 v_proj and down_proj weights at 8 bits",
	} {
		if !strings.HasPrefix(r.Facts[fact], want) {
			t.Errorf("fact %s = %q, want %q...", fact, r.Facts[fact], want)
		}
	}
	if r.Files["model"] != CoreMLPackage || r.Metrics["convert_s"] != 96.41 || r.Metrics["eight_bit_weights"] != 36 {
		t.Errorf("files %v, metrics %v", r.Files, r.Metrics)
	}

	// 4-bit value and down projections and embeddings quantized too: no
	// 8-bit flag, the embeddings' flag instead.
	p = &ConvertParams{Context: 512, KVCache: "none", Weights: Weights{BlockSize: 32, Mode: ModeSymmetric, QuantizeEmbeddings: true, VDownBits: 4}}
	sc, argvs = fakeStep(t, p, []steps.Input{source}, golden(t, ToolCoreMLConvert))
	if err := (coremlConvert{}).Run(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	got := strings.Join((*argvs)[0], " ")
	if !strings.HasSuffix(got, "--kv-cache none --threads 3 --block-size 32 --mode symmetric --quantize-embeddings") {
		t.Errorf("argv %s", got)
	}
	if _, ok := sc.Result.Facts["v_down"]; ok {
		t.Errorf("v_down fact with 4-bit projections: %q", sc.Result.Facts["v_down"])
	}
}

// Parameters a plan cannot have made are refused before anything runs.
func TestConvertRefusesBadParams(t *testing.T) {
	w := Weights{BlockSize: 32, Mode: ModeAffine, VDownBits: 8}
	for _, tc := range []struct {
		p   ConvertParams
		msg string
	}{
		{ConvertParams{Context: 1, KVCache: "stateful", Weights: w}, "needs a context (tokens) to build the Core ML model for, got 1"},
		{ConvertParams{Context: 64, KVCache: "dynamic", Weights: w}, `kv_cache must be stateful or none, not "dynamic"`},
		{ConvertParams{Context: 64, KVCache: "none", Weights: Weights{BlockSize: 32, Mode: "linear"}}, `mode must be affine or symmetric, not "linear"`},
		{ConvertParams{Context: 64, KVCache: "none", Weights: Weights{BlockSize: 32, Mode: ModeAffine, VDownBits: 6}}, "v_down_bits must be 4 or 8, not 6"},
	} {
		sc, argvs := fakeStep(t, &tc.p, []steps.Input{source}, nil)
		err := (coremlConvert{}).Run(context.Background(), sc)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || len(*argvs) != 0 {
			t.Errorf("%+v: %v (ran %q), want %q", tc.p, err, *argvs, tc.msg)
		}
	}
}

// A report that is not coreml_convert.py's fails the step, naming the
// helper and the log, rather than recording zeros.
func TestConvertRefusesAnotherReport(t *testing.T) {
	p := &ConvertParams{Context: 64, KVCache: "stateful", Weights: Weights{BlockSize: 32, Mode: ModeAffine}}
	sc, _ := fakeStep(t, p, []steps.Input{source}, []byte(`{"kv_cache": "stateful", "inputs": ["input_ids"]}`))
	err := (coremlConvert{}).Run(context.Background(), sc)
	if err == nil || !strings.Contains(err.Error(), "coreml_convert.py's report does not match") || !strings.Contains(err.Error(), sc.LogPath) {
		t.Fatalf("got %v", err)
	}
}

// writeScores leaves what coreml_validate.py writes with --scores-out:
// scores.nll of n tokens in each of sc.Out's folders named (relative), the
// i-th's values v + i/10 and every other one step higher.
func writeScores(t *testing.T, sc *steps.Context, n int, step float64, folders ...string) {
	t.Helper()
	for i, f := range folders {
		nll := make([]float64, n)
		for j := range nll {
			nll[j] = 3.2 + float64(i)/10 + step*float64(j%2)
		}
		if err := os.MkdirAll(filepath.Join(sc.Out, f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := pplstat.WriteNLL(filepath.Join(sc.Out, f, pplstat.NLLFile), nll); err != nil {
			t.Fatal(err)
		}
	}
}

func TestValidateArgvAndGate(t *testing.T) {
	pkg := steps.Input{StepID: "coreml-convert:int4@c4096", Kind: "coreml-convert", Dir: "/cache/conv",
		Result: &steps.Result{Files: map[string]string{"model": CoreMLPackage}}}
	p := &ValidateParams{Eval: steps.Eval{Chunk: 256, MaxChunks: 8}, Weights: Weights{BlockSize: 32, Mode: ModeAffine, VDownBits: 8}}
	sc, argvs := fakeStep(t, p, []steps.Input{pkg, source}, golden(t, ToolCoreMLValidate))
	writeScores(t, sc, 1016, 0.2, ScoresBaseline, ".")
	if err := (coremlValidate{}).Run(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/tools/python", ToolCoreMLValidate, "--package", "/cache/conv/" + CoreMLPackage, "--model", "/cache/source",
		"--text", "/data/eval.txt", "--ctx", "256", "--threads", "3", "--block-size", "32", "--mode", "affine", "--v-down-bits", "8", "--chunks", "8",
		"--scores-out", sc.Out}
	if len(*argvs) != 1 || !slices.Equal((*argvs)[0], want) {
		t.Fatalf("argv %q\nwant %q", *argvs, want)
	}
	r := sc.Result
	pp := r.Perplexity
	if pp == nil || pp.PPL != 25.558 || pp.Baseline != 24.424 || pp.EvalTokens != 1016 || pp.Chunks != 8 || pp.Context != 256 ||
		!strings.HasPrefix(pp.Backend, "transformers, the package's INT4 codes") {
		t.Fatalf("perplexity %+v", pp)
	}
	// KL and top-1 against the helper's own baseline, and the delta's
	// interval from the two models' per-token scores.
	if pp.KLDivergence == nil || *pp.KLDivergence != 0.0391 || pp.Top1Agreement == nil || *pp.Top1Agreement != 0.9016 ||
		pp.DeltaLow == nil || pp.DeltaHigh == nil || !(*pp.DeltaLow > 0 && *pp.DeltaLow < *pp.DeltaHigh) ||
		!strings.HasPrefix(pp.Interval, "paired bootstrap over 1016 tokens") {
		t.Errorf("against its own baseline: %+v", pp)
	}
	if len(r.Checks) != 6 || !strings.HasPrefix(r.Facts["coreml_prediction"], "no: Core ML prediction needs macOS") {
		t.Errorf("checks %d, facts %v", len(r.Checks), r.Facts)
	}

	// On macOS Core ML's own perplexity is the one gated, with its KL,
	// top-1 and scores.
	line := bytes.Replace(golden(t, ToolCoreMLValidate), []byte(`"coreml_ppl":null`), []byte(`"coreml_ppl":25.9`), 1)
	line = bytes.Replace(line, []byte(`"ran_coreml":false`), []byte(`"ran_coreml":true`), 1)
	line = bytes.Replace(line, []byte(`"coreml_kl_divergence":null`), []byte(`"coreml_kl_divergence":0.047`), 1)
	line = bytes.Replace(line, []byte(`"coreml_top1_agreement":null`), []byte(`"coreml_top1_agreement":0.89`), 1)
	sc, _ = fakeStep(t, p, []steps.Input{pkg, source}, line)
	writeScores(t, sc, 1016, 0.2, ScoresBaseline, ScoresCoreML)
	if err := (coremlValidate{}).Run(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	if pp := sc.Result.Perplexity; pp.PPL != 25.9 || sc.Result.Metrics["simulated_ppl"] != 25.558 || sc.Result.Facts["coreml_prediction"] != "yes" ||
		pp.KLDivergence == nil || *pp.KLDivergence != 0.047 || pp.Top1Agreement == nil || *pp.Top1Agreement != 0.89 || pp.DeltaLow == nil {
		t.Errorf("perplexity %+v, metrics %v", pp, sc.Result.Metrics)
	}

	// Scores without the baseline's to pair with fail the step.
	sc, _ = fakeStep(t, p, []steps.Input{pkg, source}, golden(t, ToolCoreMLValidate))
	writeScores(t, sc, 1016, 0.2, ".")
	if err := (coremlValidate{}).Run(context.Background(), sc); err == nil || !strings.Contains(err.Error(), "kept no per-token scores") {
		t.Errorf("no baseline scores: %v", err)
	}

	// No usable perplexity fails the step.
	line = bytes.Replace(golden(t, ToolCoreMLValidate), []byte(`"ppl":25.558`), []byte(`"ppl":0`), 1)
	sc, _ = fakeStep(t, p, []steps.Input{pkg, source}, line)
	if err := (coremlValidate{}).Run(context.Background(), sc); err == nil || !strings.Contains(err.Error(), "no usable probabilities") {
		t.Errorf("ppl 0: %v", err)
	}
}
