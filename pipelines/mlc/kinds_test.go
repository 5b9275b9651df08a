package mlc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/mlc/standin" // the stand-ins the fake steps run
	"github.com/edgepipe/edgepipe/pipelines/shared"
	sharedreport "github.com/edgepipe/edgepipe/pipelines/shared/report"
	_ "github.com/edgepipe/edgepipe/pipelines/shared/standin" // the baseline's scores
	"github.com/edgepipe/edgepipe/steps"
)

// fixture is a tiny Llama checkpoint and the texts a step reads.
type fixture struct {
	dir, model, eval, calibration string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, model: filepath.Join(dir, "model"), eval: filepath.Join(dir, "eval.txt"), calibration: filepath.Join(dir, "calibration.txt")}
	if err := standin.Tools["tiny-llama-checkpoint"]([]string{f.model}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	text := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 200)
	os.WriteFile(f.eval, text, 0o644)
	os.WriteFile(f.calibration, text, 0o644)
	return f
}

func (f *fixture) source() steps.Input {
	return steps.Input{StepID: "source", Kind: shared.Fetch.Name(), Dir: f.model}
}

// fakeStep is a steps.Context that records every argv and, instead of the
// real tool, runs its stand-in with its output in the step's log; a
// report given for a tool is written to the log after it, as the tool's
// last line.
type fakeStep struct {
	*steps.Context
	argvs   [][]string
	reports map[string][]byte
}

func (f *fixture) step(t *testing.T, params any, inputs ...steps.Input) *fakeStep {
	t.Helper()
	dir := t.TempDir()
	fs := &fakeStep{reports: map[string][]byte{}}
	fs.Context = &steps.Context{StepID: "step", Params: params, Inputs: inputs, Out: filepath.Join(dir, "out"),
		Scratch: filepath.Join(dir, "scratch"), Log: io.Discard, Result: &steps.Result{}, LogPath: filepath.Join(dir, "step.log"), Threads: 3,
		Tool: func(name string) ([]string, error) { return []string{"/toolchain/bin/python", name}, nil },
		Data: func(role string) (string, error) {
			if role == steps.DataCalibration {
				return f.calibration, nil
			}
			return f.eval, nil
		},
		Exec: func(_ context.Context, argv, _ []string) error {
			fs.argvs = append(fs.argvs, argv)
			log, err := os.OpenFile(fs.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			defer log.Close()
			if err := standin.Tools[argv[1]](argv[2:], log, log); err != nil {
				return err
			}
			if r, ok := fs.reports[argv[1]]; ok {
				var line bytes.Buffer
				if err := json.Compact(&line, r); err != nil {
					return err
				}
				_, err = log.Write(append(line.Bytes(), '\n'))
				return err
			}
			return nil
		}}
	for _, d := range []string{fs.Out, fs.Scratch} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return fs
}

func golden(t *testing.T, helper string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("python", "reports", strings.TrimSuffix(helper, ".py")+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (fs *fakeStep) argv(t *testing.T, want ...string) {
	t.Helper()
	if len(fs.argvs) != 1 || !slices.Equal(fs.argvs[0], want) {
		t.Fatalf("argv %q\nwant %q", fs.argvs, want)
	}
}

func (fs *fakeStep) input(kind string) steps.Input {
	return steps.Input{StepID: kind + ":x", Kind: kind, Dir: fs.Out, Result: fs.Result}
}

func TestNativeConvertArgvAndFacts(t *testing.T) {
	f := newFixture(t)
	p := &WeightParams{Quantization: "q4f16_1", Scales: ScalesImatrix, Rounding: RoundingGPTQ, CalibContext: 512, CalibChunks: 32}
	s := f.step(t, p, f.source())
	if err := (mlcNativeConvert{}).Run(context.Background(), s.Context); err != nil {
		t.Fatal(err)
	}
	s.argv(t, "/toolchain/bin/python", ToolNative, "convert-weight", "--model", f.model, "--quantization", "q4f16_1", "--scales", "imatrix",
		"--out", s.Out, "--rounding", "gptq", "--awq", "off", "--calibration", f.calibration, "--calib-ctx", "512", "--calib-chunks", "32")
	r := s.Result
	if !strings.HasPrefix(r.Facts["rounding"], "gptq asked, every weight to its nearest code: the linear layers were rounded rtn (stand-in") {
		t.Errorf("rounding fact %q", r.Facts["rounding"])
	}
	if !strings.HasPrefix(r.Facts["scales"], "imatrix:") || r.Metrics["calibration_tokens"] == 0 || r.Metrics["shards"] == 0 || r.Files["tensor_cache"] != MLCTensorCache {
		t.Errorf("facts %v metrics %v files %v", r.Facts, r.Metrics, r.Files)
	}
	if _, ok := r.Facts["awq"]; ok {
		t.Errorf("awq fact without awq")
	}

	// mse scales read no calibration text.
	s = f.step(t, &WeightParams{Quantization: "q4f32_1", Scales: ScalesMSE}, f.source())
	if err := (mlcNativeConvert{}).Run(context.Background(), s.Context); err != nil {
		t.Fatal(err)
	}
	s.argv(t, "/toolchain/bin/python", ToolNative, "convert-weight", "--model", f.model, "--quantization", "q4f32_1", "--scales", "mse", "--out", s.Out)
	if _, ok := s.Result.Metrics["calibration_tokens"]; ok || !strings.HasPrefix(s.Result.Facts["scales"], "mse:") {
		t.Errorf("mse: facts %v metrics %v", s.Result.Facts, s.Result.Metrics)
	}
}

// What the real converter reports with awq (the golden) becomes the
// step's facts and per-kind metrics.
func TestNativeConvertRecordsAWQ(t *testing.T) {
	f := newFixture(t)
	p := &WeightParams{Quantization: "q4f16_1", Scales: ScalesImatrix, Rounding: RoundingGPTQEmbedding, AWQ: true, CalibContext: 512, CalibChunks: 8}
	s := f.step(t, p, f.source())
	s.reports[ToolNative] = golden(t, ToolNative)
	if err := (mlcNativeConvert{}).Run(context.Background(), s.Context); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.argvs[0][11:], " "); got != "--rounding gptq-embedding --awq on --calibration "+f.calibration+" --calib-ctx 512 --calib-chunks 8" {
		t.Errorf("argv tail %s", got)
	}
	r := s.Result
	if !strings.HasPrefix(r.Facts["rounding"], "gptq-embedding: the tied embedding rounded by GPTQ") || !strings.HasPrefix(r.Facts["awq"], "each linear layer's input columns rescaled") {
		t.Errorf("facts %v", r.Facts)
	}
	if r.Metrics["awq_alpha_qkv_proj"] != 0.4667 || math.Abs(r.Metrics["awq_error_ratio_down_proj"]-0.01841/0.09377) > 1e-12 ||
		r.Metrics["calibration_tokens"] != 16384 || r.Metrics["tensors"] != 303 || r.Metrics["bits_per_param"] != 4.7955 {
		t.Errorf("metrics %v", r.Metrics)
	}
	if !strings.Contains(r.Facts["backend"], "(torch 2.11.0+cpu)") {
		t.Errorf("backend %q", r.Facts["backend"])
	}
}

// A report of the other subcommand, or one that is not mlc_native.py's,
// fails the step with the helper's name and log.
func TestNativeConvertRefusesOtherReports(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct{ report, msg string }{
		{`{"convert_weight": null, "gen_config": {"context_window_size": 1024, "tokenizer_files": [], "conv_template": "chatml"}}`, "reported no convert_weight result"},
		{`{"quantization": "q4f16_1", "shards": 1, "params": 3, "bits_per_param": 4.5, "torch": "2.11.0"}`, "mlc_native.py's report does not match what edgepipe reads"},
	} {
		s := f.step(t, &WeightParams{Quantization: "q4f16_1", Scales: ScalesMSE}, f.source())
		s.reports[ToolNative] = []byte(tc.report)
		err := (mlcNativeConvert{}).Run(context.Background(), s.Context)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), s.LogPath) {
			t.Errorf("%s: got %v, want %q", tc.report, err, tc.msg)
		}
	}
}

// nativeFolder converts the fixture with the native stand-in and writes
// the model folder for ctx: the inputs of the checks.
func nativeFolder(t *testing.T, f *fixture, q string, ctx int) (weights, folder steps.Input) {
	t.Helper()
	w := f.step(t, &WeightParams{Quantization: q, Scales: ScalesMSE}, f.source())
	if err := (mlcNativeConvert{}).Run(context.Background(), w.Context); err != nil {
		t.Fatal(err)
	}
	c := f.step(t, &ConfigParams{Quantization: q, Context: ctx, ConvTemplate: "chatml"}, f.source(), w.input("mlc-native-convert"))
	if err := (mlcNativeConfig{}).Run(context.Background(), c.Context); err != nil {
		t.Fatal(err)
	}
	c.argv(t, "/toolchain/bin/python", ToolNative, "gen-config", "--model", f.model, "--quantization", q, "--conv-template", "chatml",
		"--context-window-size", strconv.Itoa(ctx), "--out", c.Out)
	return w.input("mlc-native-convert"), c.input("mlc-native-config")
}

func TestNativeConfigAndValidate(t *testing.T) {
	f := newFixture(t)
	_, folder := nativeFolder(t, f, "q4f16_1", 1024)
	for _, name := range []string{MLCChatConfig, MLCTensorCache, WebLLMRecord, "params_shard_0.bin"} {
		if _, err := os.Stat(filepath.Join(folder.Dir, name)); err != nil {
			t.Errorf("the model folder lacks %s: %v", name, err)
		}
	}
	if !strings.Contains(folder.Result.Facts["runtime_requirement"], "shader-f16") {
		t.Errorf("facts %v", folder.Result.Facts)
	}

	// The layout check passes on the folder it was made for, and fails
	// the config's check when the target's context differs.
	for _, tc := range []struct {
		ctx    int
		passed bool
	}{{1024, true}, {8192, false}} {
		v := f.step(t, &ValidateParams{Context: tc.ctx, Quantization: "q4f16_1"}, folder, f.source())
		if err := (mlcValidate{}).Run(context.Background(), v.Context); err != nil {
			t.Fatal(err)
		}
		if len(v.argvs) != 0 || len(v.Result.Checks) != 3 {
			t.Fatalf("ran %q, checks %+v", v.argvs, v.Result.Checks)
		}
		for _, c := range v.Result.Checks {
			if want := tc.passed || c.Name != MLCChatConfig; c.Passed != want {
				t.Errorf("context %d: check %+v", tc.ctx, c)
			}
		}
	}

	// A folder of another quantization fails the tensors' check.
	v := f.step(t, &ValidateParams{Context: 1024, Quantization: "q4f32_1"}, folder, f.source())
	if err := (mlcValidate{}).Run(context.Background(), v.Context); err != nil {
		t.Fatal(err)
	}
	if c := v.Result.Checks[1]; c.Passed || !strings.Contains(c.Detail, "want float32") {
		t.Errorf("q4f32_1 against a q4f16_1 folder: %+v", c)
	}
}

func TestNativeConfigRefusesNoContext(t *testing.T) {
	f := newFixture(t)
	s := f.step(t, &ConfigParams{Quantization: "q4f16_1", ConvTemplate: "chatml"}, f.source(),
		steps.Input{StepID: "w", Kind: "mlc-native-convert", Dir: t.TempDir()})
	err := (mlcNativeConfig{}).Run(context.Background(), s.Context)
	if err == nil || !strings.Contains(err.Error(), "the target needs a context (tokens) for context_window_size, got 0") || len(s.argvs) != 0 {
		t.Fatalf("got %v, ran %q", err, s.argvs)
	}
}

func TestGateArgvAndBaseline(t *testing.T) {
	f := newFixture(t)
	weights, _ := nativeFolder(t, f, "q4f16_1", 1024)
	// The baseline's per-token scores and top tokens, as the
	// hf-perplexity stand-in leaves them.
	baseDir := t.TempDir()
	if err := standin.Tools["hf_perplexity.py"]([]string{"--model", f.model, "--text", f.eval, "--ctx", "512", "--chunks", "49",
		"--scores-out", baseDir, "--keep-topk"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	base := func(pp *steps.Perplexity) steps.Input {
		return steps.Input{StepID: "hf-perplexity:baseline", Kind: shared.HFPerplexity.Name(), Dir: baseDir, Result: &steps.Result{Perplexity: pp}}
	}
	same := &steps.Perplexity{PPL: 24.982, EvalTokens: 12495, Chunks: 49, Context: 512}
	s := f.step(t, &steps.Eval{Chunk: 512, MaxChunks: 49}, weights, base(same), f.source())
	s.reports[ToolGate] = golden(t, ToolGate)
	if err := (mlcGate{}).Run(context.Background(), s.Context); err != nil {
		t.Fatal(err)
	}
	s.argv(t, "/toolchain/bin/python", ToolGate, "--mlc", weights.Dir, "--model", f.model, "--text", f.eval, "--ctx", "512",
		"--digests", filepath.Join(s.Out, DecodedDigests), "--threads", "3", "--chunks", "49", "--scores-out", s.Out, "--baseline-scores", baseDir)
	r := s.Result
	if pp := r.Perplexity; pp == nil || pp.PPL != 26.377 || pp.Baseline != 24.982 || pp.EvalTokens != 12495 || pp.Chunks != 49 ||
		pp.Backend != "transformers, MLC shards read back and dequantized (float32)" {
		t.Fatalf("perplexity %+v", pp)
	}
	// KL and top-1 against the baseline's top tokens, and the delta's
	// interval from both steps' per-token scores.
	if pp := r.Perplexity; pp.KLDivergence == nil || *pp.KLDivergence != 0.0694 || pp.Top1Agreement == nil || *pp.Top1Agreement != 0.8641 ||
		pp.DeltaLow == nil || pp.DeltaHigh == nil || !(*pp.DeltaLow < *pp.DeltaHigh) || !strings.HasPrefix(pp.Interval, "paired bootstrap over ") {
		t.Errorf("against the baseline's scores: %+v", pp)
	}
	if len(r.Checks) != 1 || !r.Checks[0].Passed || r.Metrics["decoded_tensors"] != 182 || r.Files["digests"] != DecodedDigests {
		t.Errorf("checks %+v metrics %v files %v", r.Checks, r.Metrics, r.Files)
	}

	// Other tokens than the baseline's fail the check; no baseline
	// perplexity, or none of the model's, fails the step.
	other := *same
	other.Chunks = 16
	s = f.step(t, &steps.Eval{Chunk: 512}, weights, base(&other), f.source())
	s.reports[ToolGate] = golden(t, ToolGate)
	if err := (mlcGate{}).Run(context.Background(), s.Context); err != nil || s.Result.Checks[0].Passed {
		t.Errorf("other chunks: %v, %+v", err, s.Result.Checks)
	}
	s = f.step(t, &steps.Eval{Chunk: 512}, weights, base(nil), f.source())
	s.reports[ToolGate] = golden(t, ToolGate)
	if err := (mlcGate{}).Run(context.Background(), s.Context); err == nil || !strings.Contains(err.Error(), "recorded no perplexity") {
		t.Errorf("no baseline perplexity: %v", err)
	}
	s = f.step(t, &steps.Eval{Chunk: 512}, weights, base(same), f.source())
	s.reports[ToolGate] = bytes.Replace(golden(t, ToolGate), []byte(`"ppl": 26.377`), []byte(`"ppl": 0`), 1)
	if err := (mlcGate{}).Run(context.Background(), s.Context); err == nil || !strings.Contains(err.Error(), "no usable probabilities") {
		t.Errorf("ppl 0: %v", err)
	}
}

// backend: mlc-llm runs mlc_llm's documented command lines.
func TestMLCLLMArgv(t *testing.T) {
	f := newFixture(t)
	w := f.step(t, &WeightParams{Quantization: "q4f16_1"}, f.source())
	if err := (mlcConvertWeight{}).Run(context.Background(), w.Context); err != nil {
		t.Fatal(err)
	}
	w.argv(t, "/toolchain/bin/python", ToolMLCLLM, "convert_weight", f.model, "--quantization", "q4f16_1", "-o", w.Out)
	if w.Result.Metrics["shards"] == 0 {
		t.Errorf("metrics %v", w.Result.Metrics)
	}
	c := f.step(t, &ConfigParams{Quantization: "q4f16_1", Context: 2048, ConvTemplate: "chatml"}, f.source(), w.input("mlc-convert-weight"))
	if err := (mlcGenConfig{}).Run(context.Background(), c.Context); err != nil {
		t.Fatal(err)
	}
	c.argv(t, "/toolchain/bin/python", ToolMLCLLM, "gen_config", f.model, "--quantization", "q4f16_1", "--conv-template", "chatml",
		"--context-window-size", "2048", "-o", c.Out)
	m := f.step(t, &CompileParams{Device: "webgpu"}, c.input("mlc-gen-config"))
	if err := (mlcCompile{}).Run(context.Background(), m.Context); err != nil {
		t.Fatal(err)
	}
	m.argv(t, "/toolchain/bin/python", ToolMLCLLM, "compile", filepath.Join(m.Out, MLCChatConfig), "--device", "webgpu", "-o", filepath.Join(m.Out, MLCWasm))
	if m.Result.Files["model_lib"] != MLCWasm {
		t.Errorf("files %v", m.Result.Files)
	}

	s := f.step(t, &ConfigParams{Quantization: "q4f16_1", ConvTemplate: "chatml"}, f.source(), w.input("mlc-convert-weight"))
	if err := (mlcGenConfig{}).Run(context.Background(), s.Context); err == nil || !strings.Contains(err.Error(), "needs a context") || len(s.argvs) != 0 {
		t.Errorf("no context: %v, ran %q", err, s.argvs)
	}
}

// The gate's digests file is read strictly: a file of another shape is
// refused rather than compared as if it listed no tensors.
func TestReadDigestsStrict(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ body, err string }{
		{`{"format": "sha256", "tensors": {"a.weight": "00"}}`, ""},
		{`{"format": "sha256", "tensors": {}}`, "lists no tensors"},
		{`{"tensors": {"a.weight": "00"}}`, "missing field(s) format"},
		{`{"format": "sha256", "digests": {"a.weight": "00"}}`, "missing field(s) tensors"},
	} {
		p := filepath.Join(dir, "d.json")
		os.WriteFile(p, []byte(tc.body), 0o644)
		d, err := readDigests(p)
		if tc.err == "" {
			if err != nil || d["a.weight"] != "00" {
				t.Errorf("%s: %v, %v", tc.body, d, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: got %v, want %q", tc.body, err, tc.err)
		}
	}
}

// reference is a generate-reference step's output for the fixture's
// checkpoint, made by the stand-in and recorded as the kind records it.
func (f *fixture) reference(t *testing.T) steps.Input {
	t.Helper()
	dir := t.TempDir()
	prompts := filepath.Join(dir, "prompts.json")
	os.WriteFile(prompts, []byte(`{"prompts": [{"id": "one", "messages": [{"role": "user", "content": "Answer with one word."}]},
		{"id": "two", "messages": [{"role": "user", "content": "Explain in two sentences why the sea is salty."}]}]}`), 0o644)
	var out bytes.Buffer
	if err := standin.Tools["generate_reference.py"]([]string{"--model", f.model, "--prompts", prompts, "--out", dir, "--max-new-tokens", "8"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var rep sharedreport.GenerateReference
	if err := steps.DecodeReport("generate_reference.py", bytes.TrimSpace(out.Bytes()), &rep); err != nil {
		t.Fatal(err)
	}
	res := &steps.Result{}
	if err := shared.RecordReference(res, dir, rep, 8); err != nil {
		t.Fatal(err)
	}
	return steps.Input{StepID: "generate:reference@n8", Kind: shared.GenerateReference.Name(), Dir: dir, Result: res}
}

// The decode check reads the gate's weights, dequantized into the source,
// and the reference; it is judged by the family's bound.
func TestDecodeArgvAndChecks(t *testing.T) {
	f := newFixture(t)
	weights, _ := nativeFolder(t, f, "q4f16_1", 1024)
	ref := f.reference(t)
	p := &shared.DecodeParams{MaxNewTokens: 8, MinTokenAgreement: 0.5, MaxMeanKL: 1}
	s := f.step(t, p, weights, f.source(), ref)
	if err := (mlcDecode{}).Run(context.Background(), s.Context); err != nil {
		t.Fatal(err)
	}
	s.argv(t, "/toolchain/bin/python", ToolDecode, "--mlc", weights.Dir, "--model", f.model, "--reference", filepath.Join(ref.Dir, "reference.json"), "--threads", "3")
	g := s.Result.Generation
	if g == nil || g.Sequences != 2 || g.MaxNewTokens != 8 || g.DecodeBound == nil || *g.DecodeBound != DecodeBound.MaxAbs || g.MinTokenAgreement != 0.5 {
		t.Fatalf("generation %+v", g)
	}
	if len(s.Result.Checks) != 2 || !s.Result.Checks[0].Passed || !s.Result.Checks[1].Passed {
		t.Errorf("checks %+v", s.Result.Checks)
	}

	// The recipe's bound, crossed, fails the target's check.
	strict := &shared.DecodeParams{MaxNewTokens: 8, MinTokenAgreement: 1, MaxMeanKL: 1}
	s = f.step(t, strict, weights, f.source(), ref)
	if err := (mlcDecode{}).Run(context.Background(), s.Context); err != nil {
		t.Fatal(err)
	}
	if c := s.Result.Checks[1]; c.Name != "generation agreement" || c.Passed {
		t.Errorf("min_token_agreement 1 passed: %+v", c)
	}

	// Without the weights, or planned for another length, it refuses.
	if err := (mlcDecode{}).Run(context.Background(), f.step(t, p, f.source(), ref).Context); err == nil || !strings.Contains(err.Error(), "mlc-native-convert, mlc-convert-weight") {
		t.Errorf("no weights: %v", err)
	}
	other := &shared.DecodeParams{MaxNewTokens: 64, MinTokenAgreement: 0.5, MaxMeanKL: 1}
	if err := (mlcDecode{}).Run(context.Background(), f.step(t, other, weights, f.source(), ref).Context); err == nil || !strings.Contains(err.Error(), "planned for 64") {
		t.Errorf("another length: %v", err)
	}
}
