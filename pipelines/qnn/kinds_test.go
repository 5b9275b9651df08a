package qnn

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
// another); a tool in fail logs its text and exits 1.
type fakeTools struct {
	sc      *steps.Context
	argv    [][]string
	reports map[string]string
	writes  map[string][]byte
	fail    map[string]string
}

func newFake(t *testing.T, params any, inputs ...steps.Input) *fakeTools {
	t.Helper()
	dir := t.TempDir()
	f := &fakeTools{reports: map[string]string{}, writes: map[string][]byte{}, fail: map[string]string{}}
	for _, tool := range []string{ToolQDQ, ToolAIHub, ToolHTP} {
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
			lf, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			defer lf.Close()
			tool := filepath.Base(argv[0])
			if text, ok := f.fail[tool]; ok {
				fmt.Fprint(lf, text)
				return errors.New("exit status 3")
			}
			for name, b := range f.writes {
				if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
					return err
				}
			}
			_, err = fmt.Fprintf(lf, "%s: working\n%s\n", tool, f.reports[tool])
			return err
		},
		Data:    func(role string) (string, error) { return "/data/" + role + ".txt", nil },
		Result:  &steps.Result{},
		LogPath: log, Log: io.Discard, Threads: 2}
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

var onnxFile = []byte{0x08, 0x09, 'o', 'n', 'n', 'x'}

func fetched() steps.Input { return steps.Input{StepID: "source", Kind: "fetch", Dir: "/models/src"} }

// qdqInput is a qnn-qdq step's output folder: the model and its sidecars.
func qdqInput(t *testing.T) steps.Input {
	t.Helper()
	dir := t.TempDir()
	for name, b := range map[string][]byte{"model.onnx": onnxFile, "config.json": []byte(`{}`), "tokenizer.json": []byte(`{}`)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return steps.Input{StepID: "qnn-qdq:w8a16@s64+htp", Kind: "qnn-qdq", Dir: dir, Result: &steps.Result{Files: map[string]string{"model": "model.onnx"}}}
}

func TestQDQArgvAndReport(t *testing.T) {
	export := steps.Input{StepID: "onnx-export:fp32-prefill", Kind: "onnx-export", Dir: "/cache/prefill",
		Result: &steps.Result{Files: map[string]string{"model": "model.onnx"}}}
	p := &QDQParams{SeqLen: 64, WeightType: "int8", ActivationType: "uint16", Samples: 4, StaticInputs: true, PerChannel: true}
	f := newFake(t, p, export, fetched())
	f.writes["model.onnx"] = onnxFile
	if err := (qnnQDQ{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/qnn_qdq.py", "--onnx", "/cache/prefill/model.onnx", "--tokenizer", "/models/src",
		"--calibration", "/data/calibration.txt", "--out", f.sc.Out, "--seq-len", "64", "--samples", "4",
		"--weight-type", "int8", "--activation-type", "uint16", "--static-inputs", "--per-channel"}
	if !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q\nwant %q", f.argv[0], want)
	}
	r := f.sc.Result
	if r.Metrics["dequantize_linear"] != 1874 || r.Facts["per_channel"] != "211 MatMul weights quantized per output channel as 1x1 Convs" ||
		!strings.HasPrefix(r.Facts["static_inputs"], "attention_mask and position_ids folded") || r.Facts["float_nodes"] != "" ||
		!strings.HasPrefix(r.Facts["rms_norms"], "61 RMSNorm chains") {
		t.Errorf("result %+v", r)
	}

	for _, tc := range []struct {
		p      QDQParams
		fields map[string]string
		want   string
	}{
		{QDQParams{SeqLen: 1, WeightType: "int8", ActivationType: "uint16"}, nil, "seq_len must be set"},
		{QDQParams{SeqLen: 64, WeightType: "fp8", ActivationType: "uint16"}, nil, `weight_type "fp8" / activation_type "uint16": use uint8`},
		{*p, map[string]string{"dequantize_linear": "0"}, "no DequantizeLinear node"},
		{*p, map[string]string{"per_channel_convs": "0"}, "per-channel weights were asked for, but qnn_qdq.py rewrote no MatMul"},
		{*p, map[string]string{"preprocesed": "true"}, `unknown field "preprocesed"`},
		{*p, map[string]string{"bytes": ""}, "missing field(s) bytes"},
	} {
		f := newFake(t, &tc.p, export, fetched())
		f.writes["model.onnx"] = onnxFile
		f.reports[ToolQDQ] = edit(f.reports[ToolQDQ], tc.fields)
		if err := (qnnQDQ{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v %v: %v, want %q", tc.p, tc.fields, err, tc.want)
		}
	}
}

func TestCompileAIHub(t *testing.T) {
	t.Setenv("QAI_HUB_API_TOKEN", "token")
	p := &CompileParams{Backend: QNNBackendAIHub, Device: "snapdragon-8-gen-3", SeqLen: 64, HubDevice: "Samsung Galaxy S24 (Family)", HubTimeoutS: 1800}
	f := newFake(t, p, qdqInput(t))
	f.writes["model.bin"] = []byte("context binary")
	if err := (qnnCompile{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	in := f.sc.Inputs[0].Dir
	want := []string{"/opt/tools/qnn_ai_hub.py", "--onnx", filepath.Join(in, "model.onnx"), "--device", "Samsung Galaxy S24 (Family)",
		"--seq-len", "64", "--out", filepath.Join(f.sc.Out, "model.bin"), "--timeout", "1800"}
	if !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q\nwant %q", f.argv[0], want)
	}
	if got := f.sc.Result.Facts["backend"]; got != "Qualcomm AI Hub compile job jgdx6k1lp for Samsung Galaxy S24 (Family) (qnn_context_binary)" {
		t.Errorf("backend fact %q", got)
	}
	if _, err := os.Stat(filepath.Join(f.sc.Out, "tokenizer.json")); err != nil {
		t.Errorf("sidecars not copied: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.sc.Out, "model.onnx")); err == nil {
		t.Error("the QDQ model was copied beside the context binary")
	}

	noDevice := *p
	noDevice.HubDevice = ""
	f = newFake(t, &noDevice, qdqInput(t))
	if err := (qnnCompile{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), `no Qualcomm AI Hub device is known for "snapdragon-8-gen-3"`) {
		t.Errorf("no hub device: %v", err)
	}
	f = newFake(t, p, qdqInput(t))
	if err := (qnnCompile{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), "exited 0 but wrote no context binary") {
		t.Errorf("no binary: %v", err)
	}
	t.Setenv("QAI_HUB_API_TOKEN", "")
	t.Setenv("QAIHUB_CLIENT_INI", filepath.Join(t.TempDir(), "missing.ini"))
	f = newFake(t, p, qdqInput(t))
	if err := (qnnCompile{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), "needs a Qualcomm AI Hub API token") || len(f.argv) != 0 {
		t.Errorf("no token: %v, ran %q", err, f.argv)
	}
}

func TestCompileSDK(t *testing.T) {
	t.Setenv("QNN_SDK_ROOT", "/opt/qnn")
	p := &CompileParams{Backend: QNNBackendSDK, Device: "snapdragon-x-elite", SeqLen: 64, DSPArch: "v73"}
	f := newFake(t, p, qdqInput(t))
	f.writes["model.bin"] = []byte("context binary")
	if err := (qnnCompile{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	var tools []string
	for _, a := range f.argv {
		tools = append(tools, filepath.Base(a[0]))
	}
	if !slices.Equal(tools, []string{ToolONNXConverter, ToolModelLibGenerator, ToolContextBinaryGenerator}) {
		t.Errorf("tools %v", tools)
	}
	if last := strings.Join(f.argv[2], " "); !strings.Contains(last, "--backend /opt/qnn/lib/x86_64-linux-clang/libQnnHtp.so") ||
		!strings.Contains(last, "--output_dir "+f.sc.Out) {
		t.Errorf("context binary generator argv %s", last)
	}
	cfg, err := os.ReadFile(filepath.Join(f.sc.Scratch, "htp_config.json"))
	if err != nil || !strings.Contains(string(cfg), `"dsp_arch": "v73"`) {
		t.Errorf("htp config %s %v", cfg, err)
	}

	noArch := *p
	noArch.DSPArch = ""
	if err := (qnnCompile{}).Run(context.Background(), newFake(t, &noArch, qdqInput(t)).sc); err == nil || !strings.Contains(err.Error(), "no Hexagon architecture is known") {
		t.Errorf("no arch: %v", err)
	}
	bad := *p
	bad.Backend = QNNBackendORT
	if err := (qnnCompile{}).Run(context.Background(), newFake(t, &bad, qdqInput(t)).sc); err == nil || !strings.Contains(err.Error(), "ort-qdq needs no compile step") {
		t.Errorf("ort-qdq: %v", err)
	}
	t.Setenv("QNN_SDK_ROOT", "")
	if err := (qnnCompile{}).Run(context.Background(), newFake(t, p, qdqInput(t)).sc); err == nil || !strings.Contains(err.Error(), "set QNN_SDK_ROOT") {
		t.Errorf("no SDK: %v", err)
	}
	if got := (qnnCompile{}).Tools(p); !slices.Equal(got, []string{ToolONNXConverter, ToolModelLibGenerator, ToolContextBinaryGenerator}) {
		t.Errorf("tools of qnn-sdk %v", got)
	}
	if got := (qnnCompile{}).Tools(&CompileParams{Backend: QNNBackendAIHub}); !slices.Equal(got, []string{ToolAIHub}) {
		t.Errorf("tools of ai-hub %v", got)
	}
}

func htpInputs(t *testing.T, chunks, ctx int) []steps.Input {
	return []steps.Input{qdqInput(t), fetched(),
		{StepID: "hf-perplexity:baseline", Kind: "hf-perplexity", Result: &steps.Result{Perplexity: &steps.Perplexity{PPL: 19.618, Chunks: chunks, Context: ctx, EvalTokens: 62}}}}
}

func htpParams() *HTPParams {
	return &HTPParams{Eval: steps.Eval{Chunk: 64, MaxChunks: 2}, Device: "snapdragon-8-gen-3", SoCModel: 57, HTPArch: 75, MaxAbsLogitDiff: 20, MinTop1: 0.6}
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

func TestHTPArgvAndGate(t *testing.T) {
	in := htpInputs(t, 2, 64)
	in[2].Dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(in[2].Dir, pplstat.NLLFile), nllFile(62, 2.9, 0.2), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFake(t, htpParams(), in...)
	f.writes["model_ctx.onnx"] = onnxFile
	f.writes["model_ctx_qnn.bin"] = []byte("context binary")
	// What qnn_htp.py leaves in --scores-out: scratch, not the published
	// folder.
	scores := filepath.Join(f.sc.Scratch, "scores")
	if err := os.MkdirAll(scores, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scores, pplstat.NLLFile), nllFile(62, 2.95, 0.1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := (qnnHTP{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/qnn_htp.py", "--qdq", filepath.Join(f.sc.Inputs[0].Dir, "model.onnx"), "--hf", "/models/src",
		"--text", "/data/eval.txt", "--out", f.sc.Out, "--ctx", "64", "--soc-model", "57", "--htp-arch", "75", "--chunks", "2",
		"--scores-out", scores, "--baseline-scores", in[2].Dir}
	if !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q\nwant %q", f.argv[0], want)
	}
	r := f.sc.Result
	if len(r.Checks) != 2 || !r.Checks[0].Passed || !r.Checks[1].Passed || r.Perplexity.PPL != 19.5448 || r.Perplexity.Baseline != 19.618 ||
		r.Versions["qnn"] != "2.51.0" || r.Files["context_binary"] != "model_ctx_qnn.bin" || r.Metrics["simulator_seconds_per_chunk"] != 40.21 ||
		!strings.Contains(r.Perplexity.Backend, "HTP simulator on x86-64") {
		t.Errorf("result %+v %+v", r, r.Perplexity)
	}
	// KL and top-1 against the baseline's top tokens (the logits check's
	// top-1 stays a check), and the delta's interval from both steps'
	// per-token scores.
	if pp := r.Perplexity; pp.KLDivergence == nil || *pp.KLDivergence != 0.0873 || pp.Top1Agreement == nil || *pp.Top1Agreement != 0.8226 ||
		r.Metrics["logits_top1_agreement"] != 0.921875 || pp.DeltaLow == nil || pp.DeltaHigh == nil || !(*pp.DeltaLow < *pp.DeltaHigh) ||
		!strings.HasPrefix(pp.Interval, "paired bootstrap over 62 tokens") {
		t.Errorf("against the baseline's scores: %+v", pp)
	}
	if _, err := os.Stat(filepath.Join(f.sc.Out, pplstat.NLLFile)); err == nil {
		t.Error("the per-token scores are in the published folder")
	}

	// Under the top-1 share: the check fails, the step does not.
	f = newFake(t, htpParams(), htpInputs(t, 2, 64)...)
	f.writes["model_ctx.onnx"] = onnxFile
	f.writes["model_ctx_qnn.bin"] = []byte("context binary")
	f.reports[ToolHTP] = strings.Replace(f.reports[ToolHTP], `"top1_agreement": 0.921875`, `"top1_agreement": 0.453`, 1)
	if err := (qnnHTP{}).Run(context.Background(), f.sc); err != nil || f.sc.Result.Checks[1].Passed || !f.sc.Result.Checks[0].Passed {
		t.Errorf("top-1 under the limit: %v %+v", err, f.sc.Result.Checks)
	}
}

func TestHTPRefusals(t *testing.T) {
	noSoC := htpParams()
	noSoC.SoCModel = 0
	badTop1 := htpParams()
	badTop1.MinTop1 = 1.5
	for _, tc := range []struct {
		name   string
		p      *HTPParams
		chunks int
		report func(string) string
		write  bool
		want   string
	}{
		{"no SoC", noSoC, 2, nil, true, `no QNN SoC model and HTP architecture are known for device "snapdragon-8-gen-3"`},
		{"top-1 over 1", badTop1, 2, nil, true, "min_top1_agreement in [0, 1]"},
		{"no files", htpParams(), 2, nil, false, "exited 0 but wrote no model_ctx.onnx"},
		{"compile only", htpParams(), 2, func(s string) string { return edit(s, map[string]string{"gate": "null"}) }, true,
			"reported no gate: it compiled the model only"},
		{"no logits check", htpParams(), 2, func(s string) string {
			return strings.Replace(s, `"top1_agreement": 0.921875`, `"top1_agreement": null`, 1)
		}, true, "reported no logits comparison"},
		{"gate field missing", htpParams(), 2, func(s string) string { return strings.Replace(s, `"load_s": 3.41, `, "", 1) }, true,
			"missing field(s) gate.load_s"},
		{"other chunks", htpParams(), 4, nil, true, "the baseline hf-perplexity:baseline scored 4 chunks of 64 tokens, this model 2 of 64"},
	} {
		f := newFake(t, tc.p, htpInputs(t, tc.chunks, 64)...)
		if tc.write {
			f.writes["model_ctx.onnx"] = onnxFile
			f.writes["model_ctx_qnn.bin"] = []byte("context binary")
		}
		if tc.report != nil {
			f.reports[ToolHTP] = tc.report(f.reports[ToolHTP])
		}
		err := (qnnHTP{}).Run(context.Background(), f.sc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}

	// Nodes the backend refused are quoted from the log.
	f := newFake(t, htpParams(), htpInputs(t, 2, 64)...)
	f.fail[ToolHTP] = "qnn_htp: refused: Validation FAILED for 1 nodes in OrtNodeUnit (MatMul) :\n" +
		"qnn_htp: refused:   Operator type: MatMul Node name: /model/rotary_emb/MatMul_2 Node index: 7\n"
	err := (qnnHTP{}).Run(context.Background(), f.sc)
	if err == nil || !strings.Contains(err.Error(), "QNN's HTP backend refused nodes of the graph for snapdragon-8-gen-3") ||
		!strings.Contains(err.Error(), "Node name: /model/rotary_emb/MatMul_2") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("refused nodes: %v", err)
	}
}
