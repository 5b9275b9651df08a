package llmcompressor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// fakeTools is a steps.Context whose tools do not run: Exec records each
// argv, leaves the files a tool would write in Out, and appends to the
// step's log the report the tool prints (llmc_quantize.py's golden unless
// a test sets another).
type fakeTools struct {
	sc      *steps.Context
	argv    [][]string
	reports map[string]string
	writes  map[string][]byte
}

func newFake(t *testing.T, params any, inputs ...steps.Input) *fakeTools {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("python", "reports", "llmc_quantize.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeTools{reports: map[string]string{ToolLLMCQuantize: strings.TrimSpace(string(b)),
		ToolLLMCPerplexity: `{"add_bos": false, "chunks": 8, "ctx": 256, "kl_divergence": 0.052, "ppl": 22.405, "scored": 1016, "tokens": 24236, "top1_agreement": 0.91}`},
		writes: map[string][]byte{}}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "step.log")
	f.sc = &steps.Context{StepID: "step", Params: params, Inputs: inputs, Out: out, Scratch: dir,
		Tool: func(name string) ([]string, error) { return []string{"/opt/tools/" + name}, nil },
		Exec: func(_ context.Context, argv []string, _ []string) error {
			f.argv = append(f.argv, argv)
			for name, b := range f.writes {
				if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
					return err
				}
			}
			lf, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			tool := filepath.Base(argv[0])
			fmt.Fprintf(lf, "%s: working\n%s\n", tool, f.reports[tool])
			return lf.Close()
		},
		Data:    func(role string) (string, error) { return "/data/" + role + ".txt", nil },
		Result:  &steps.Result{},
		LogPath: log, Log: io.Discard, Threads: 2}
	return f
}

// smolLM2 is a checkpoint folder with SmolLM2-135M's config.json.
func smolLM2(t *testing.T) steps.Input {
	t.Helper()
	dir := filepath.Dir(writeConfig(t, `{"hidden_size": 576, "intermediate_size": 1536, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64}`))
	return steps.Input{StepID: "source", Kind: "fetch", Dir: dir}
}

// writesCheckpoint makes Exec leave a compressed-tensors checkpoint in groups
// of 64: a 4-bit linear and an 8-bit one.
func (f *fakeTools) writesCheckpoint(t *testing.T) *fakeTools {
	t.Helper()
	f.writes["config.json"] = []byte(`{"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
  "config_groups": {"group_0": {"weights": {"num_bits": 4, "strategy": "group", "group_size": 64}},
    "group_1": {"weights": {"num_bits": 8, "strategy": "group", "group_size": 64}}}}}`)
	dir := t.TempDir()
	writeST(t, dir, `{"l.weight_packed": {"dtype": "I32", "shape": [1536, 72], "data_offsets": [0, 0]},
		"l.weight_scale": {"dtype": "F32", "shape": [1536, 9], "data_offsets": [0, 0]},
		"d.weight_packed": {"dtype": "I32", "shape": [576, 384], "data_offsets": [0, 0]},
		"d.weight_scale": {"dtype": "F32", "shape": [576, 24], "data_offsets": [0, 0]}}`)
	b, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	f.writes["model.safetensors"] = b
	return f
}

func gptqParams() *QuantizeParams {
	return &QuantizeParams{Scheme: "gptq", Samples: 32, SeqLen: 512, Observer: "mse", ActOrder: "static", VDownBits: 8}
}

func TestQuantizeArgvAndReport(t *testing.T) {
	f := newFake(t, gptqParams(), smolLM2(t)).writesCheckpoint(t)
	if err := (llmcQuantize{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/llmc_quantize.py", "--model", f.sc.Inputs[0].Dir, "--calibration", "/data/calibration.txt", "--out", f.sc.Out,
		"--scheme", "gptq", "--group-size", "64", "--samples", "32", "--seq-len", "512", "--n-grid", "20", "--observer", "mse",
		"--threads", "2", "--v-down-bits", "8", "--actorder", "static"}
	if !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q\nwant %q", f.argv[0], want)
	}
	r := f.sc.Result
	if len(r.Checks) != 1 || !r.Checks[0].Passed || r.Metrics["group_size"] != 64 || r.Metrics["quantized_linears"] != 2 ||
		r.Metrics["eight_bit_linears"] != 1 || r.Metrics["calibration_samples"] != 32 ||
		r.Facts["group_size"] != "64, the largest of 128, 64, 32 that divides every linear layer's input width (576, 1536)" ||
		r.Facts["calibration"] != "32 samples of 512 tokens from a 20836-token text" || r.Versions["llmcompressor"] != "0.14.0.1" ||
		r.Facts["actorder"] != "static" || r.Facts["rounding"] != "" {
		t.Errorf("result %+v", r)
	}

	// AWQ rounded to nearest: its grid and rounding, no column order.
	p := &QuantizeParams{Scheme: "awq", GroupSize: 64, Samples: 32, SeqLen: 512, NGrid: 10, Observer: "minmax", Rounding: "rtn", Symmetric: true}
	f = newFake(t, p, smolLM2(t)).writesCheckpoint(t)
	if err := (llmcQuantize{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	a := strings.Join(f.argv[0], " ")
	if !strings.Contains(a, "--n-grid 10") || !strings.Contains(a, "--symmetric --rounding rtn") || strings.Contains(a, "--actorder") ||
		strings.Contains(a, "--v-down-bits") {
		t.Errorf("awq argv %s", a)
	}
	if f.sc.Result.Facts["group_size"] != "64, from the recipe" || f.sc.Result.Facts["awq_grid"] != "10 candidate scales per layer" ||
		f.sc.Result.Facts["weights"] != "symmetric" {
		t.Errorf("awq result %+v", f.sc.Result.Facts)
	}
}

func TestQuantizeRefusals(t *testing.T) {
	with := func(edit func(*QuantizeParams)) *QuantizeParams {
		p := gptqParams()
		edit(p)
		return p
	}
	for _, tc := range []struct {
		name string
		p    *QuantizeParams
		want string
	}{
		{"scheme", with(func(p *QuantizeParams) { p.Scheme = "rtn" }), `scheme must be gptq or awq, not "rtn"`},
		{"samples", with(func(p *QuantizeParams) { p.Samples = 0 }), "num_calibration_samples must be positive"},
		{"grid", with(func(p *QuantizeParams) { p.Scheme, p.Rounding, p.NGrid = "awq", "gptq", 2 }), "n_grid must be at least 3, not 2"},
		{"observer", with(func(p *QuantizeParams) { p.Observer = "" }), `observer must be minmax or mse, not ""`},
		{"rounding", with(func(p *QuantizeParams) { p.Scheme, p.NGrid, p.Rounding = "awq", 20, "" }), `rounding must be gptq or rtn, not ""`},
		{"v_down_bits", with(func(p *QuantizeParams) { p.VDownBits = 6 }), "v_down_bits must be 4 or 8, not 6"},
		{"actorder", with(func(p *QuantizeParams) { p.ActOrder = "" }), `actorder must be static, group or none, not ""`},
		{"group size", with(func(p *QuantizeParams) { p.GroupSize = 128 }), "group_size 128 does not divide this model's linear layer widths"},
	} {
		f := newFake(t, tc.p, smolLM2(t)).writesCheckpoint(t)
		if err := (llmcQuantize{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if len(f.argv) != 0 {
			t.Errorf("%s: the script ran", tc.name)
		}
	}

	f := newFake(t, gptqParams(), smolLM2(t))
	if err := (llmcQuantize{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), "llmc_quantize.py wrote no usable checkpoint") {
		t.Errorf("no checkpoint: %v", err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"n_grid": null, `, "", "missing field(s) n_grid"},
		{`"format": "pack-quantized"`, `"format": 4`, "llmc_quantize.py's report does not match"},
	} {
		f := newFake(t, gptqParams(), smolLM2(t)).writesCheckpoint(t)
		f.reports[ToolLLMCQuantize] = strings.Replace(f.reports[ToolLLMCQuantize], tc.from, tc.to, 1)
		if err := (llmcQuantize{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("report with %s: %v, want %q", tc.to, err, tc.want)
		}
	}
}

func perplexityInputs(chunks, tokens int) []steps.Input {
	return []steps.Input{{StepID: "llmc-quantize:gptq-w4a16", Kind: "llmc-quantize", Dir: "/cache/gptq"},
		{StepID: "hf-perplexity:baseline", Kind: "hf-perplexity", Result: &steps.Result{Perplexity: &steps.Perplexity{PPL: 21.238, Chunks: chunks, Context: 256, EvalTokens: tokens}}}}
}

func TestPerplexityArgvAndCheck(t *testing.T) {
	ev := &steps.Eval{Chunk: 256, MaxChunks: 8}
	f := newFake(t, ev, perplexityInputs(8, 1016)...)
	if err := (llmcPerplexity{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/llmc_perplexity.py", "--model", "/cache/gptq", "--text", "/data/eval.txt", "--ctx", "256", "--chunks", "8", "--scores-out", f.sc.Out, "--baseline-scores", ""}
	if !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q\nwant %q", f.argv[0], want)
	}
	pp := f.sc.Result.Perplexity
	if pp.PPL != 22.405 || pp.Baseline != 21.238 || pp.Backend != "transformers+compressed-tensors" || len(f.sc.Result.Checks) != 1 || !f.sc.Result.Checks[0].Passed ||
		pp.KLDivergence == nil || *pp.KLDivergence != 0.052 || pp.Top1Agreement == nil || *pp.Top1Agreement != 0.91 {
		t.Errorf("result %+v %+v", pp, f.sc.Result.Checks)
	}

	// A baseline that scored other tokens fails the check, not the step.
	f = newFake(t, ev, perplexityInputs(8, 1000)...)
	if err := (llmcPerplexity{}).Run(context.Background(), f.sc); err != nil || f.sc.Result.Checks[0].Passed {
		t.Errorf("other tokens: %v %+v", err, f.sc.Result.Checks)
	}
	f = newFake(t, ev, perplexityInputs(8, 1016)...)
	f.reports[ToolLLMCPerplexity] = strings.Replace(f.reports[ToolLLMCPerplexity], `"ppl": 22.405`, `"ppl": 0`, 1)
	if err := (llmcPerplexity{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), "llmc_perplexity.py reported perplexity 0") {
		t.Errorf("no perplexity: %v", err)
	}
	f = newFake(t, ev, perplexityInputs(8, 1016)...)
	f.reports[ToolLLMCPerplexity] = strings.Replace(f.reports[ToolLLMCPerplexity], `"add_bos": false, `, "", 1)
	if err := (llmcPerplexity{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), "missing field(s) add_bos") {
		t.Errorf("missing add_bos: %v", err)
	}
	noBase := perplexityInputs(8, 1016)
	noBase[1].Result = &steps.Result{}
	if err := (llmcPerplexity{}).Run(context.Background(), newFake(t, ev, noBase...).sc); err == nil || !strings.Contains(err.Error(), "recorded no perplexity") {
		t.Errorf("no baseline: %v", err)
	}
}

// The report is decoded into the typed struct: a stray field json would
// have ignored is an error.
func TestQuantizeReportIsStrict(t *testing.T) {
	f := newFake(t, gptqParams(), smolLM2(t)).writesCheckpoint(t)
	var m map[string]any
	if err := json.Unmarshal([]byte(f.reports[ToolLLMCQuantize]), &m); err != nil {
		t.Fatal(err)
	}
	m["calibration_windows"] = 40
	b, _ := json.Marshal(m)
	f.reports[ToolLLMCQuantize] = string(b)
	var re *steps.ReportError
	if err := (llmcQuantize{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), `unknown field "calibration_windows"`) {
		t.Errorf("%v", err)
	} else if !errors.As(err, &re) || re.Helper != ToolLLMCQuantize {
		t.Errorf("not a ReportError naming the helper: %v", err)
	}
}

// The decode check loads the quantized checkpoint with the reference; its
// report is judged by the family's bound and the recipe's.
func TestDecodeArgvAndChecks(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("python", "reports", "llmc_decode.json"))
	if err != nil {
		t.Fatal(err)
	}
	model := steps.Input{StepID: "llmc-quantize:gptq-w4a16", Kind: "llmc-quantize", Dir: "/cache/gptq"}
	ref := steps.Input{StepID: "generate:reference", Kind: "generate-reference", Dir: "/cache/ref",
		Result: &steps.Result{Files: map[string]string{"reference": "reference.json"}, Metrics: map[string]float64{"sequences": 4, "max_new_tokens": 64}}}
	f := newFake(t, &shared.DecodeParams{MaxNewTokens: 64, MinTokenAgreement: 0.5, MaxMeanKL: 1}, model, ref)
	f.reports[ToolLLMCDecode] = strings.TrimSpace(string(golden))
	if err := (llmcDecode{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/llmc_decode.py", "--model", "/cache/gptq", "--reference", "/cache/ref/reference.json", "--threads", "2"}
	if len(f.argv) != 1 || !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q, want %q", f.argv, want)
	}
	g := f.sc.Result.Generation
	if g == nil || g.DecodeBound == nil || *g.DecodeBound != DecodeBound.MaxAbs || *g.DecodeMinTop1 != DecodeBound.MinTop1 {
		t.Fatalf("generation %+v", g)
	}
	for _, c := range f.sc.Result.Checks {
		if !c.Passed {
			t.Errorf("the built-in model's measurement fails %s: %s", c.Name, c.Detail)
		}
	}
	// Without the checkpoint it cannot run.
	if err := (llmcDecode{}).Run(context.Background(), newFake(t, &shared.DecodeParams{MaxNewTokens: 64}, ref).sc); err == nil ||
		!strings.Contains(err.Error(), `needs an input from a "llmc-quantize" step`) {
		t.Errorf("no checkpoint: %v", err)
	}
}
