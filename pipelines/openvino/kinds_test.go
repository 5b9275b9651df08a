package openvino

import (
	"context"
	"encoding/binary"
	"encoding/json"
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
// another).
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
		b, err := os.ReadFile(filepath.Join("python", "reports", strings.TrimSuffix(tool, ".py")+".json"))
		if err != nil {
			t.Fatal(err)
		}
		f.reports[tool] = strings.TrimSpace(string(b))
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

// writeIR makes Exec leave an IR in Out.
func (f *fakeTools) writeIR() *fakeTools {
	f.writes[ModelFile] = []byte(`<?xml version="1.0"?>` + "\n" + `<net name="Model0" version="11">` + "\n</net>\n")
	f.writes["openvino_model.bin"] = []byte("weights")
	return f
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

func fetched() steps.Input { return steps.Input{StepID: "source", Kind: "fetch", Dir: "/models/src"} }

func exported() steps.Input {
	return steps.Input{StepID: ExportStepID, Kind: "openvino-export", Dir: "/cache/export",
		Result: &steps.Result{Files: map[string]string{"model": ModelFile}}}
}

func TestExportArgvAndReport(t *testing.T) {
	f := newFake(t, &ExportParams{TrustRemoteCode: true}, fetched()).writeIR()
	if err := (ovExport{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/openvino_export.py", "--model", "/models/src", "--out", f.sc.Out, "--threads", "2", "--trust-remote-code"}
	if !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q\nwant %q", f.argv[0], want)
	}
	r := f.sc.Result
	if r.Files["model"] != ModelFile || r.Versions["openvino"] != "2026.4.1" || r.Versions["nncf"] != "3.4.0" ||
		r.Facts["weights"] != "f32: 272 constants, 134541120 elements, 538164480 bytes" || r.Facts["inputs"] != "input_ids,attention_mask,position_ids,beam_idx" {
		t.Errorf("result %+v", r)
	}
	if v, ok := r.Metrics["low_bit_weight_fraction"]; !ok || v != 0 {
		t.Errorf("low-bit fraction %v %v", v, ok)
	}
}

func TestExportRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields map[string]string
		write  bool
		want   string
	}{
		{"no IR", nil, false, "wrote no openvino_model.xml"},
		{"another file", map[string]string{"model": `"model.xml"`}, true, `reported the model "model.xml", not openvino_model.xml`},
		{"not stateful", map[string]string{"stateful": "false"}, true, "the IR is not stateful"},
		{"no logits", map[string]string{"outputs": `["hidden"]`}, true, "it needs input_ids and logits"},
		// The compression's report is not the export's.
		{"quantize report", map[string]string{"config": "{}", "calibration_samples": "0"}, true, "openvino_export.py's report does not match"},
		{"missing field", map[string]string{"low_bit_fraction": ""}, true, "missing field(s) low_bit_fraction"},
	} {
		f := newFake(t, &ExportParams{}, fetched())
		if tc.write {
			f.writeIR()
		}
		f.reports[ToolExport] = edit(f.reports[ToolExport], tc.fields)
		if err := (ovExport{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestQuantizeRunAndReport(t *testing.T) {
	p := &QuantizeParams{WeightFormat: "int4", Sym: true, GroupSize: 32, GroupSizeFallback: "adjust", Ratio: 1, AWQ: true, Samples: 8, SeqLen: 256}
	f := newFake(t, p, exported()).writeIR()
	f.reports[ToolQuantize] = edit(f.reports[ToolQuantize], map[string]string{"calibration_samples": "8"})
	if err := (ovQuantize{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/openvino_quantize.py", "--in", "/cache/export", "--out", f.sc.Out, "--weight-format", "int4", "--ratio", "1",
		"--threads", "2", "--sym", "--group-size", "32", "--group-size-fallback", "adjust", "--awq",
		"--calibration", "/data/calibration.txt", "--samples", "8", "--seq-len", "256"}
	if !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q\nwant %q", f.argv[0], want)
	}
	r := f.sc.Result
	if r.Metrics["calibration_samples"] != 8 || r.Metrics["calibration_seq_len"] != 256 || r.Metrics["low_bit_weight_fraction"] != 0.9996 ||
		!strings.Contains(r.Facts["weights"], "u4: 210 constants") {
		t.Errorf("result %+v", r)
	}

	// INT8 reads u8 (or i8) weights; the golden's u8 constant counts.
	p8 := &QuantizeParams{WeightFormat: "int8", Ratio: 1}
	f = newFake(t, p8, exported()).writeIR()
	if err := (ovQuantize{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(f.argv[0], "--calibration") || slices.Contains(f.argv[0], "--group-size") {
		t.Errorf("int8 argv %q", f.argv[0])
	}
	if _, ok := f.sc.Result.Metrics["calibration_samples"]; ok {
		t.Errorf("calibration recorded for a data-free method: %+v", f.sc.Result.Metrics)
	}
}

func TestQuantizeRefusals(t *testing.T) {
	int4 := QuantizeParams{WeightFormat: "int4", Sym: true, GroupSize: 128, GroupSizeFallback: "adjust", Ratio: 1}
	for _, tc := range []struct {
		name   string
		p      QuantizeParams
		fields map[string]string
		want   string
	}{
		{"bad format", QuantizeParams{WeightFormat: "nf4", Ratio: 1}, nil, `weight_format must be int4 or int8, not "nf4"`},
		{"awq without data", QuantizeParams{WeightFormat: "int4", GroupSize: 128, GroupSizeFallback: "adjust", Ratio: 1, AWQ: true},
			nil, "the data-aware methods need calibration_samples >= 1"},
		{"nothing compressed", int4, map[string]string{"weights": `{"f32": {"bytes": 8, "constants": 1, "elements": 2}}`},
			"the IR holds no u4 weights: NNCF compressed nothing to int4"},
		{"export report", int4, map[string]string{"config": "", "calibration_samples": ""}, "missing field(s) calibration_samples, config"},
	} {
		f := newFake(t, &tc.p, exported()).writeIR()
		f.reports[ToolQuantize] = edit(f.reports[ToolQuantize], tc.fields)
		err := (ovQuantize{}).Run(context.Background(), f.sc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if tc.fields == nil && len(f.argv) != 0 {
			t.Errorf("%s: the script ran for refused params", tc.name)
		}
	}
}

func validateInputs(chunks int) []steps.Input {
	return []steps.Input{
		{StepID: "openvino-quantize:int4", Kind: "openvino-quantize", Dir: "/cache/int4", Result: &steps.Result{Files: map[string]string{"model": ModelFile}}},
		fetched(),
		{StepID: "hf-perplexity:baseline", Kind: "hf-perplexity", Result: &steps.Result{Perplexity: &steps.Perplexity{PPL: 24.5868, Chunks: chunks, Context: 256, EvalTokens: 1016}}},
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

func TestValidateArgvAndReport(t *testing.T) {
	p := &ValidateParams{Eval: steps.Eval{Chunk: 256, MaxChunks: 8}, Precision: DefaultPrecision}
	in := validateInputs(8)
	in[2].Dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(in[2].Dir, pplstat.NLLFile), nllFile(1016, 3.2, 0.01), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFake(t, p, in...)
	f.writes[pplstat.NLLFile] = nllFile(1016, 3.4, 0.3)
	if err := (ovValidate{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/openvino_validate.py", "--ir", "/cache/int4", "--hf", "/models/src", "--text", "/data/eval.txt", "--ctx", "256",
		"--precision", "f32", "--threads", "2", "--chunks", "8", "--scores-out", f.sc.Out, "--baseline-scores", in[2].Dir}
	if !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q\nwant %q", f.argv[0], want)
	}
	r := f.sc.Result
	if r.Perplexity.PPL != 31.811 || r.Perplexity.Baseline != 24.5868 || !strings.HasPrefix(r.Perplexity.Backend, "openvino 2026.4.1-20443") ||
		r.Metrics["max_abs_logit_diff"] != 6.3214 || r.Facts["inference_precision"] != "f32" {
		t.Errorf("result %+v %+v", r, r.Perplexity)
	}
	// KL and top-1 against the baseline's top tokens (the logits check's
	// top-1 stays a metric), and the delta's interval from both steps'
	// per-token scores.
	if pp := r.Perplexity; pp.KLDivergence == nil || *pp.KLDivergence != 0.0412 || pp.Top1Agreement == nil || *pp.Top1Agreement != 0.8917 ||
		r.Metrics["logits_top1_agreement"] != 0.73828125 || pp.DeltaLow == nil || pp.DeltaHigh == nil || !(*pp.DeltaLow > 0 && *pp.DeltaLow < *pp.DeltaHigh) ||
		!strings.HasPrefix(pp.Interval, "paired bootstrap over 1016 tokens") {
		t.Errorf("against the baseline's scores: %+v", pp)
	}
	// Scores that do not pair with the baseline's.
	f = newFake(t, p, in...)
	f.writes[pplstat.NLLFile] = nllFile(1000, 3.4, 0.3)
	if err := (ovValidate{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), "they do not pair") {
		t.Errorf("unpaired scores: %v", err)
	}

	// --no-logits-check's nulls: perplexity only.
	f = newFake(t, p, validateInputs(8)...)
	f.reports[ToolValidate] = edit(f.reports[ToolValidate], map[string]string{"max_abs_logit_diff": "null", "mean_abs_logit_diff": "null",
		"top1_agreement": "null", "logit_positions": "null"})
	if err := (ovValidate{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.sc.Result.Metrics["max_abs_logit_diff"]; ok || f.sc.Result.Perplexity == nil {
		t.Errorf("result without the logits check %+v", f.sc.Result)
	}

	for _, tc := range []struct {
		name   string
		p      *ValidateParams
		chunks int
		fields map[string]string
		want   string
	}{
		{"bad precision", &ValidateParams{Eval: p.Eval, Precision: "int8"}, 8, nil, `precision must be f32, bf16 or f16, not "int8"`},
		{"not the CPU", p, 8, map[string]string{"device": `"GPU"`}, `ran on "GPU", not the CPU plugin`},
		{"other chunks", p, 4, nil, "scored 4 chunks of 256 tokens, this model 8 of 256"},
		{"mistyped", p, 8, map[string]string{"chunks": "8.5"}, "openvino_validate.py's report does not match"},
	} {
		f := newFake(t, tc.p, validateInputs(tc.chunks)...)
		f.reports[ToolValidate] = edit(f.reports[ToolValidate], tc.fields)
		if err := (ovValidate{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := (ovValidate{}).Run(context.Background(), newFake(t, p, validateInputs(8)[1:]...).sc); err == nil ||
		!strings.Contains(err.Error(), "needs, first, the step that made the OpenVINO IR") {
		t.Errorf("no model: %v", err)
	}
}

func TestBenchMeasure(t *testing.T) {
	f := newFake(t, nil)
	prompt, decode, err := ovBench{}.Measure(context.Background(), f.sc, "/cache/int4/"+ModelFile, 128, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/openvino_bench.py", "--ir", "/cache/int4", "--prompt-tokens", "128", "--runs", "3", "--threads", "2"}
	if !slices.Equal(f.argv[0], want) || len(prompt) != 3 || decode[2] != 14031582 || f.sc.Result.Facts["bench_inference_precision"] != "f32" {
		t.Errorf("argv %q, timings %v %v, facts %v", f.argv[0], prompt, decode, f.sc.Result.Facts)
	}
	f = newFake(t, nil)
	f.reports[ToolBench] = edit(f.reports[ToolBench], map[string]string{"device": `"NPU"`})
	if _, _, err := (ovBench{}).Measure(context.Background(), f.sc, ModelFile, 128, 3, 2); err == nil || !strings.Contains(err.Error(), `timed "NPU", not the CPU plugin`) {
		t.Errorf("NPU: %v", err)
	}
	if _, _, err := (ovBench{}).Measure(context.Background(), newFake(t, nil).sc, ModelFile, 128, 5, 2); err == nil ||
		!strings.Contains(err.Error(), "reported 3 prompt and 3 decode timings, 5 runs were asked for") {
		t.Errorf("runs: %v", err)
	}
}
