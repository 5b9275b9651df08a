package onnx

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/pplstat"
	"github.com/edgepipe/edgepipe/steps"
)

// fakeTools is a steps.Context whose tools do not run: Exec records each
// argv, leaves the files a tool would write in Out, and appends to the
// step's log the report the tool prints (its golden unless a test sets
// another), after a line of progress as the real tools print.
type fakeTools struct {
	sc      *steps.Context
	argv    [][]string
	reports map[string]string
	writes  map[string][]byte
}

func newFake(t *testing.T, params any, inputs ...steps.Input) *fakeTools {
	t.Helper()
	dir := t.TempDir()
	f := &fakeTools{reports: map[string]string{}, writes: map[string][]byte{}}
	for _, tool := range []string{ToolExport, ToolQuantize, ToolValidate, ToolBench} {
		f.reports[tool] = golden(t, tool)
	}
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

// golden is the helper's golden report, as one line.
func golden(t *testing.T, helper string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("python", "reports", strings.TrimSuffix(helper, ".py")+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// edit returns a report line with fields set to raw JSON values; a field
// set to "" is dropped, one the line lacks is added.
func edit(line string, fields map[string]string) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		panic(err)
	}
	for k, v := range fields {
		if v == "" {
			delete(m, k)
		} else {
			m[k] = json.RawMessage(v)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var onnxFile = []byte{0x08, 0x09, 'o', 'n', 'n', 'x'}

func fetched(dir string) steps.Input { return steps.Input{StepID: "source", Kind: "fetch", Dir: dir} }

func TestExportArgvAndReport(t *testing.T) {
	f := newFake(t, &ExportParams{Opset: 18, Past: true}, fetched("/models/src"))
	f.writes["model.onnx"] = onnxFile
	if err := (onnxExport{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/onnx_export.py", "--model", "/models/src", "--out", f.sc.Out, "--opset", "18"}
	if len(f.argv) != 1 || !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q, want %q", f.argv, want)
	}
	r := f.sc.Result
	if r.Files["model"] != "model.onnx" || r.Metrics["opset"] != 18 || r.Metrics["kv_layers"] != 30 || r.Facts["kv_cache"] != "true" ||
		r.Facts["inputs"] != "input_ids,attention_mask,position_ids" {
		t.Errorf("result %+v", r)
	}

	f = newFake(t, &ExportParams{Opset: 17, Past: false}, fetched("/models/src"))
	f.writes["model.onnx"] = onnxFile
	f.reports[ToolExport] = edit(f.reports[ToolExport], map[string]string{"kv_layers": "0", "kv_cache": "false", "opset": "17"})
	if err := (onnxExport{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	if a := f.argv[0]; a[len(a)-1] != "--no-past" || a[len(a)-2] != "17" {
		t.Errorf("prefill argv %q", a)
	}
	if _, ok := f.sc.Result.Metrics["kv_layers"]; ok || f.sc.Result.Facts["kv_cache"] != "false" {
		t.Errorf("prefill result %+v", f.sc.Result)
	}
}

func TestExportRefusals(t *testing.T) {
	f := newFake(t, &ExportParams{Opset: 16, Past: true}, fetched("/m"))
	if err := (onnxExport{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), "opset 16 is too old: use 17") {
		t.Errorf("opset 16: %v", err)
	}
	if len(f.argv) != 0 {
		t.Errorf("the exporter ran for a refused opset: %q", f.argv)
	}
	for _, tc := range []struct {
		name   string
		fields map[string]string
		write  bool
		want   string
	}{
		{"no file", nil, false, "wrote no model.onnx"},
		{"old opset written", map[string]string{"opset": "15"}, true, "has opset 15, older than 17"},
		{"no KV cache", map[string]string{"kv_layers": "0"}, true, "no past_key_values inputs"},
		{"no logits", map[string]string{"outputs": `["hidden_states"]`}, true, "no logits output"},
		{"missing field", map[string]string{"bytes": ""}, true, "missing field(s) bytes"},
		{"unknown field", map[string]string{"extra": "2"}, true, `unknown field "extra"`},
	} {
		f := newFake(t, &ExportParams{Opset: 18, Past: true}, fetched("/m"))
		if tc.write {
			f.writes["model.onnx"] = onnxFile
		}
		f.reports[ToolExport] = edit(f.reports[ToolExport], tc.fields)
		err := (onnxExport{}).Run(context.Background(), f.sc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// A report that does not fit its type names the helper.
	f = newFake(t, &ExportParams{Opset: 18, Past: true}, fetched("/m"))
	f.writes["model.onnx"] = onnxFile
	f.reports[ToolExport] = edit(f.reports[ToolExport], map[string]string{"opset": `"18"`})
	var re *steps.ReportError
	if err := (onnxExport{}).Run(context.Background(), f.sc); !errors.As(err, &re) || re.Helper != ToolExport {
		t.Errorf("a string opset: %v", err)
	}
}

func exported() steps.Input {
	return steps.Input{StepID: "onnx-export:fp32", Kind: "onnx-export", Dir: "/cache/export",
		Result: &steps.Result{Files: map[string]string{"model": "model.onnx"}}}
}

func TestQuantizeArgv(t *testing.T) {
	base := []string{"/opt/tools/onnx_quantize.py", "--in", "/cache/export/model.onnx", "--out", "OUT", "--block-size", "32"}
	for _, tc := range []struct {
		p    QuantizeParams
		want []string
	}{
		{QuantizeParams{Method: MethodHQQ, BlockSize: 32, LMHeadBits: 8, VDownBits: 8},
			[]string{"--method", "hqq", "--lm-head-bits", "8", "--v-down-bits", "8"}},
		// Symmetric means nothing to HQQ, which always fits a zero point.
		{QuantizeParams{Method: MethodHQQ, BlockSize: 32, Symmetric: true}, []string{"--method", "hqq"}},
		{QuantizeParams{Method: MethodRTN, BlockSize: 32, Symmetric: false}, []string{"--method", "rtn", "--asymmetric"}},
		{QuantizeParams{Method: MethodRTN, BlockSize: 32, Symmetric: true, KeepLMHead: true, LMHeadBits: 8},
			[]string{"--method", "rtn", "--keep-lm-head"}},
	} {
		f := newFake(t, &tc.p, exported())
		f.writes["model.onnx"] = onnxFile
		if err := (onnxQuantize{}).Run(context.Background(), f.sc); err != nil {
			t.Errorf("%+v: %v", tc.p, err)
			continue
		}
		want := append(append([]string{}, base...), tc.want...)
		got := slices.Clone(f.argv[0])
		got[4] = strings.Replace(got[4], f.sc.Out, "OUT", 1)
		if !slices.Equal(got, want) {
			t.Errorf("%+v: argv %q, want %q", tc.p, got, want)
		}
	}
}

func TestQuantizeReport(t *testing.T) {
	p := &QuantizeParams{Method: MethodHQQ, BlockSize: 32, LMHeadBits: 8, VDownBits: 8}
	f := newFake(t, p, exported())
	f.writes["model.onnx"] = onnxFile
	if err := (onnxQuantize{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	r := f.sc.Result
	if r.Metrics["matmulnbits"] != 210 || r.Metrics["eight_bit_layers"] != 60 || !strings.Contains(r.Facts["lm_head"], "tied embedding") ||
		!strings.HasPrefix(r.Facts["v_down"], "60 v_proj and down_proj MatMuls at 8 bits") || r.Facts["padded"] != "" {
		t.Errorf("result %+v", r)
	}

	// An untied projection at the width asked for, padded blocks, and
	// one at another width, which fails the step.
	f = newFake(t, p, exported())
	f.writes["model.onnx"] = onnxFile
	f.reports[ToolQuantize] = edit(f.reports[ToolQuantize], map[string]string{"lm_head_bits": "8", "lm_head_tied": "false", "padded_k": "[1000]"})
	if err := (onnxQuantize{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(f.sc.Result.Facts["lm_head"], "the output projection at 8 bits") || !strings.Contains(f.sc.Result.Facts["padded"], "[1000]") {
		t.Errorf("result %+v", f.sc.Result)
	}
	for _, tc := range []struct {
		fields map[string]string
		want   string
	}{
		{map[string]string{"lm_head_bits": "4", "lm_head_tied": "false"}, "asked for a 8-bit output projection, onnx_quantize.py made it 4 bits"},
		{map[string]string{"matmulnbits": "0"}, "no MatMul became MatMulNBits"},
		{map[string]string{"lm_head_bits": `"8"`}, "onnx_quantize.py's report does not match"},
	} {
		f := newFake(t, p, exported())
		f.writes["model.onnx"] = onnxFile
		f.reports[ToolQuantize] = edit(f.reports[ToolQuantize], tc.fields)
		if err := (onnxQuantize{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.fields, err, tc.want)
		}
	}
	// A graph without an output projection (null) is not a width mismatch.
	f = newFake(t, p, exported())
	f.writes["model.onnx"] = onnxFile
	f.reports[ToolQuantize] = edit(f.reports[ToolQuantize], map[string]string{"lm_head_bits": "null", "lm_head_tied": "false"})
	if err := (onnxQuantize{}).Run(context.Background(), f.sc); err != nil || f.sc.Result.Facts["lm_head"] != "" {
		t.Errorf("no output projection: %v, %+v", err, f.sc.Result.Facts)
	}
}

func TestQuantizeRefusals(t *testing.T) {
	for _, tc := range []struct {
		p    QuantizeParams
		want string
	}{
		{QuantizeParams{Method: MethodHQQ, BlockSize: 24}, "block_size 24 is not a power of two of at least 16"},
		{QuantizeParams{Method: MethodHQQ, BlockSize: 8}, "block_size 8 is not a power of two of at least 16"},
		{QuantizeParams{Method: "gptq", BlockSize: 32}, `method must be hqq or rtn, not "gptq"`},
		{QuantizeParams{Method: MethodHQQ, BlockSize: 32, LMHeadBits: 6}, "lm_head_bits must be 4 or 8, not 6"},
		{QuantizeParams{Method: MethodHQQ, BlockSize: 32, VDownBits: 16}, "v_down_bits must be 4 or 8, not 16"},
	} {
		f := newFake(t, &tc.p, exported())
		if err := (onnxQuantize{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.want)
		}
		if len(f.argv) != 0 {
			t.Errorf("%+v: the quantizer ran", tc.p)
		}
	}
}

func validateInputs(chunks, ctx int) []steps.Input {
	return []steps.Input{
		{StepID: "onnx-quantize:int4", Kind: "onnx-quantize", Dir: "/cache/int4", Result: &steps.Result{Files: map[string]string{"model": "model.onnx"}}},
		fetched("/models/src"),
		{StepID: "hf-perplexity:baseline", Kind: "hf-perplexity", Result: &steps.Result{Perplexity: &steps.Perplexity{PPL: 21.18, Chunks: chunks, Context: ctx, EvalTokens: 1016}}},
	}
}

// nllFile is a scores.nll of n tokens, each with negative
// log-likelihood v, and the next one's v+step.
func nllFile(n int, v, step float64) []byte {
	var b []byte
	for i := range n {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v+step*float64(i%2)))
	}
	return b
}

func TestValidateArgvAndGate(t *testing.T) {
	p := &ValidateParams{Eval: steps.Eval{Chunk: 256, MaxChunks: 8}, MaxAbsLogitDiff: 25}
	in := validateInputs(8, 256)
	in[2].Dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(in[2].Dir, pplstat.NLLFile), nllFile(1016, 3, 0.1), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFake(t, p, in...)
	f.writes[pplstat.NLLFile] = nllFile(1016, 3, 0.12)
	if err := (onnxValidate{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/onnx_validate.py", "--onnx", "/cache/int4/model.onnx", "--hf", "/models/src", "--text", "/data/eval.txt",
		"--ctx", "256", "--chunks", "8", "--scores-out", f.sc.Out, "--baseline-scores", in[2].Dir}
	if !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q, want %q", f.argv[0], want)
	}
	r := f.sc.Result
	if len(r.Checks) != 1 || !r.Checks[0].Passed || r.Perplexity == nil || r.Perplexity.PPL != 21.23706 || r.Perplexity.Baseline != 21.18 ||
		r.Perplexity.Backend != "onnxruntime CPUExecutionProvider" || r.Metrics["logits_top1_agreement"] != 1 {
		t.Errorf("result %+v %+v", r, r.Perplexity)
	}
	// KL and top-1 against the baseline's top tokens, and the delta's
	// interval from both steps' per-token scores.
	if pp := r.Perplexity; pp.KLDivergence == nil || *pp.KLDivergence != 2.13e-05 || pp.Top1Agreement == nil || *pp.Top1Agreement != 0.999 ||
		pp.DeltaLow == nil || pp.DeltaHigh == nil || !(*pp.DeltaLow > 0 && *pp.DeltaLow < *pp.DeltaHigh) ||
		!strings.HasPrefix(pp.Interval, "paired bootstrap over 1016 tokens") {
		t.Errorf("against the baseline's scores: %+v", pp)
	}

	// A baseline that kept no scores to pair with.
	in[2].Dir = t.TempDir()
	f = newFake(t, p, in...)
	f.writes[pplstat.NLLFile] = nllFile(1016, 3, 0.12)
	if err := (onnxValidate{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), "kept no per-token scores") {
		t.Errorf("no baseline scores: %v", err)
	}

	// Over the limit: the check fails, the step does not.
	f = newFake(t, p, validateInputs(8, 256)...)
	f.reports[ToolValidate] = edit(f.reports[ToolValidate], map[string]string{"max_abs_logit_diff": "31.5"})
	if err := (onnxValidate{}).Run(context.Background(), f.sc); err != nil || f.sc.Result.Checks[0].Passed {
		t.Errorf("over the limit: %v %+v", err, f.sc.Result.Checks)
	}
}

func TestValidateRefusals(t *testing.T) {
	p := &ValidateParams{Eval: steps.Eval{Chunk: 256, MaxChunks: 8}, MaxAbsLogitDiff: 25}
	for _, tc := range []struct {
		name   string
		p      *ValidateParams
		inputs []steps.Input
		fields map[string]string
		want   string
	}{
		{"no limit", &ValidateParams{Eval: p.Eval}, validateInputs(8, 256), nil, "max_abs_logit_diff must be a positive number"},
		{"no model", p, validateInputs(8, 256)[1:], nil, "needs, first, the step that made the ONNX model"},
		{"no logits check", p, validateInputs(8, 256), map[string]string{"max_abs_logit_diff": "null"}, "reported no logits comparison"},
		{"other chunks", p, validateInputs(4, 256), nil, "the baseline hf-perplexity:baseline scored 4 chunks of 256 tokens, this model 8 of 256"},
		{"no perplexity", p, validateInputs(8, 256), map[string]string{"ppl": "0"}, "reported perplexity 0"},
	} {
		f := newFake(t, tc.p, tc.inputs...)
		f.reports[ToolValidate] = edit(f.reports[ToolValidate], tc.fields)
		if err := (onnxValidate{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestBenchMeasure(t *testing.T) {
	f := newFake(t, nil)
	prompt, decode, err := onnxBench{}.Measure(context.Background(), f.sc, "/cache/int4/model.onnx", 128, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/onnx_bench.py", "--onnx", "/cache/int4/model.onnx", "--prompt-tokens", "128", "--runs", "3", "--threads", "2"}
	if !slices.Equal(f.argv[0], want) || len(prompt) != 3 || decode[0] != 9811204 {
		t.Errorf("argv %q, timings %v %v", f.argv[0], prompt, decode)
	}
	if _, _, err := (onnxBench{}).Measure(context.Background(), newFake(t, nil).sc, "m.onnx", 128, 4, 2); err == nil ||
		!strings.Contains(err.Error(), "reported 3 prompt and 3 decode timings, 4 runs were asked for") {
		t.Errorf("too few runs: %v", err)
	}
	f = newFake(t, nil)
	f.reports[ToolBench] = edit(f.reports[ToolBench], map[string]string{"decode_ns": "[1, 0, 2]"})
	if _, _, err := (onnxBench{}).Measure(context.Background(), f.sc, "m.onnx", 128, 3, 2); err == nil || !strings.Contains(err.Error(), "a timing of 0 ns") {
		t.Errorf("a zero timing: %v", err)
	}
}
