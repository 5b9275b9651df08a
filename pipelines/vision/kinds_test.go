package vision

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/steps"
)

// fakeTool stands in for a helper in a kind's Run: it records the argv
// the kind built, writes the files the kind then checks, and prints
// report as the helper's last output line.
type fakeTool struct {
	argv   [][]string
	report []byte
	files  map[string]string // relative to the step's output folder
}

// golden is a helper's report golden (python/reports/), edited, on one
// line: what the real helper prints.
func golden(t *testing.T, helper string, edit func(m map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("python", "reports", strings.TrimSuffix(helper, ".py")+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		if b, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
	}
	var line bytes.Buffer
	if err := json.Compact(&line, b); err != nil {
		t.Fatal(err)
	}
	return line.Bytes()
}

// runKind runs kind's step with params and inputs against tool, with the
// data roles at /data/ROLE.npz, 3 threads granted and tools at
// /tools/NAME.
func runKind(t *testing.T, kind steps.Kind, params any, inputs []steps.Input, tool *fakeTool) (*steps.Context, error) {
	t.Helper()
	dir := t.TempDir()
	sc := &steps.Context{StepID: "under-test", Params: params, Inputs: inputs, Out: filepath.Join(dir, "out"),
		Scratch: dir, LogPath: filepath.Join(dir, "step.log"), Log: io.Discard, Result: &steps.Result{}, Threads: 3,
		Progress: func(string, int64, int64) {},
		Tool:     func(name string) ([]string, error) { return []string{"/tools/" + name}, nil },
		Data:     func(role string) (string, error) { return "/data/" + role + ".npz", nil },
	}
	if err := os.MkdirAll(sc.Out, 0o755); err != nil {
		t.Fatal(err)
	}
	sc.Exec = func(_ context.Context, argv []string, _ []string) error {
		tool.argv = append(tool.argv, argv)
		for name, body := range tool.files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(sc.Out, name)), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(sc.Out, name), []byte(body), 0o644); err != nil {
				return err
			}
		}
		return os.WriteFile(sc.LogPath, append(append([]byte("progress line\n"), tool.report...), '\n'), 0o644)
	}
	return sc, kind.Run(context.Background(), sc)
}

// in is a step's input of kind in dir, with the files its result names.
func in(kind, stepID, dir string, files map[string]string) steps.Input {
	return steps.Input{StepID: stepID, Kind: kind, Dir: dir, Result: &steps.Result{Files: files}}
}

var (
	source     = in("fetch", "source", "/models/src", nil)
	exportIn   = in(KindExport, "vision-export:fp32", "/steps/export", map[string]string{"model": "model.onnx"})
	onnxModel  = map[string]string{"model.onnx": "\x08\x09onnx"}
	wantErrors = func(t *testing.T, name string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, want)
		}
	}
)

// reference is the reference step's input, having scored images at top1.
func reference(images int, top1 float64) steps.Input {
	r := in(KindEval, ReferenceStepID, "/steps/ref", nil)
	r.Result.Accuracy = &steps.Accuracy{Top1: top1, Images: images, Backend: "torch 2.11.0"}
	return r
}

func sameArgv(t *testing.T, name string, got [][]string, want ...string) {
	t.Helper()
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("%s ran %q\nwant %q", name, got, want)
	}
}

func TestExportKind(t *testing.T) {
	tool := &fakeTool{report: golden(t, ToolExport, nil), files: onnxModel}
	sc, err := runKind(t, visionExport{}, &ExportParams{Opset: 18}, []steps.Input{source}, tool)
	if err != nil {
		t.Fatal(err)
	}
	sameArgv(t, "vision-export", tool.argv, "/tools/vision_export.py", "--model", "/models/src", "--set", "/data/eval.npz",
		"--out", sc.Out, "--opset", "18")
	r := sc.Result
	if r.Files["model"] != "model.onnx" || r.Metrics["opset"] != 18 || len(r.Checks) != 1 || !r.Checks[0].Passed || r.Facts["batch"] != "dynamic" {
		t.Errorf("result %+v", r)
	}

	// Logits further from PyTorch's than the limit: the check fails, the step records it.
	tool = &fakeTool{report: golden(t, ToolExport, func(m map[string]any) { m["max_abs_logit_diff"] = 0.25 }), files: onnxModel}
	if sc, err = runKind(t, visionExport{}, &ExportParams{Opset: 18}, []steps.Input{source}, tool); err != nil || sc.Result.Checks[0].Passed {
		t.Errorf("a 0.25 logit difference: %v, checks %+v", err, sc.Result.Checks)
	}
	for name, tc := range map[string]struct {
		edit func(map[string]any)
		want string
	}{
		"fixed batch":     {func(m map[string]any) { m["dynamic_batch"] = false }, "batch axis is fixed"},
		"nothing checked": {func(m map[string]any) { m["checked_images"] = 0 }, "checked no images"},
		"missing field":   {func(m map[string]any) { delete(m, "static_same_pads") }, "missing field(s) static_same_pads"},
		"unknown field":   {func(m map[string]any) { m["graph"] = "g" }, `unknown field "graph"`},
	} {
		_, err := runKind(t, visionExport{}, &ExportParams{Opset: 18}, []steps.Input{source}, &fakeTool{report: golden(t, ToolExport, tc.edit), files: onnxModel})
		wantErrors(t, name, err, tc.want)
	}
	var re *steps.ReportError
	_, err = runKind(t, visionExport{}, &ExportParams{Opset: 18}, []steps.Input{source},
		&fakeTool{report: golden(t, ToolExport, func(m map[string]any) { m["opset"] = "18" }), files: onnxModel})
	if !errors.As(err, &re) || re.Helper != ToolExport {
		t.Errorf("a string opset: %v, want the helper's ReportError", err)
	}
	// Refused before anything runs.
	tool = &fakeTool{}
	_, err = runKind(t, visionExport{}, &ExportParams{Opset: 12}, []steps.Input{source}, tool)
	wantErrors(t, "opset 12", err, "opset 12 is too old: use 13 or newer")
	if len(tool.argv) != 0 {
		t.Errorf("opset 12 ran %q", tool.argv)
	}
}

func TestQuantizeKind(t *testing.T) {
	p := &QuantizeParams{Method: "entropy", PerChannel: false, Samples: 100, KeepStem: true, KeepFloat: "/classifier/", SymmetricActivations: true}
	tool := &fakeTool{report: golden(t, ToolQuantize, nil), files: onnxModel}
	sc, err := runKind(t, visionQuantize{}, p, []steps.Input{exportIn}, tool)
	if err != nil {
		t.Fatal(err)
	}
	sameArgv(t, "vision-quantize", tool.argv, "/tools/vision_quantize.py", "--in", "/steps/export/model.onnx", "--calibration", "/data/calibration.npz",
		"--out", sc.Out, "--method", "entropy", "--keep-float", "/classifier/", "--per-tensor", "--keep-stem", "--symmetric-activations", "--samples", "100")
	if f := sc.Result.Facts["format"]; !strings.Contains(f, "per tensor") || !strings.Contains(f, "int8 activations (symmetric") {
		t.Errorf("format fact %q", f)
	}
	if m := sc.Result.Metrics; m["calibration_images"] != 360 || m["kept_float"] != 2 || m["int8_initializers"] != 226 {
		t.Errorf("metrics %v: want the report's", m)
	}
	// onnx-int8's defaults: per channel, 7-bit weights.
	tool = &fakeTool{report: golden(t, ToolQuantize, nil), files: onnxModel}
	sc, err = runKind(t, visionQuantize{}, &QuantizeParams{Method: "minmax", PerChannel: true, ReduceRange: true}, []steps.Input{exportIn}, tool)
	if err != nil {
		t.Fatal(err)
	}
	sameArgv(t, "vision-quantize defaults", tool.argv, "/tools/vision_quantize.py", "--in", "/steps/export/model.onnx", "--calibration",
		"/data/calibration.npz", "--out", sc.Out, "--method", "minmax", "--keep-float", "", "--reduce-range")

	for name, tc := range map[string]struct {
		p    *QuantizeParams
		edit func(map[string]any)
		want string
	}{
		"method":          {&QuantizeParams{Method: "kl"}, nil, `calibration method "kl" is not minmax, entropy or percentile`},
		"keep_float":      {&QuantizeParams{Method: "minmax", KeepFloat: "(unclosed"}, nil, "keep_float \"(unclosed\" is not a regular expression"},
		"no int8 weights": {&QuantizeParams{Method: "minmax"}, func(m map[string]any) { m["int8_initializers"] = 0 }, "nothing was quantized"},
		"no calibration":  {&QuantizeParams{Method: "minmax"}, func(m map[string]any) { m["calibration_images"] = 0 }, "no calibration images were read from /data/calibration.npz"},
	} {
		_, err := runKind(t, visionQuantize{}, tc.p, []steps.Input{exportIn}, &fakeTool{report: golden(t, ToolQuantize, tc.edit), files: onnxModel})
		wantErrors(t, name, err, tc.want)
	}
}

// qnnEvalReport is vision_qnn.py eval's golden: the eval result only,
// over images of the set's 359.
func qnnEvalReport(t *testing.T, images int, edit func(e map[string]any)) []byte {
	return golden(t, ToolQNN, func(m map[string]any) {
		m["quantize"], m["compile"] = nil, nil
		e := m["eval"].(map[string]any)
		e["images"] = images
		if edit != nil {
			edit(e)
		}
	})
}

// Each runtime's scorer gets its arguments and its report is read into
// the step's accuracy against the reference.
func TestEvalKind(t *testing.T) {
	ref := reference(359, 0.9805)
	preds := func(sc *steps.Context) string { return filepath.Join(sc.Out, PredictionsFile) }
	qdq := in(KindQuantize, "vision-quantize:int8", "/steps/q", map[string]string{"model": "model.onnx"})
	for _, tc := range []struct {
		name    string
		p       *EvalParams
		inputs  []steps.Input
		report  []byte
		argv    func(sc *steps.Context) []string
		backend string
		check   func(t *testing.T, sc *steps.Context)
	}{
		{name: "reference", p: &EvalParams{Runtime: RuntimeTorch}, inputs: []steps.Input{source},
			report: golden(t, ToolEval, func(m map[string]any) { m["agreement"], m["runtime"] = nil, "torch 2.11.0" }),
			argv: func(sc *steps.Context) []string {
				return []string{"/tools/vision_eval.py", "--set", "/data/eval.npz", "--predictions", preds(sc), "--torch", "/models/src"}
			},
			backend: "torch 2.11.0",
			check: func(t *testing.T, sc *steps.Context) {
				if a := sc.Result.Accuracy; a.Reference != nil || a.Agreement != nil || a.Correct != 349 {
					t.Errorf("the reference's accuracy %+v", a)
				}
			}},
		{name: "onnx, Q/DQ as written", p: &EvalParams{Runtime: RuntimeONNX, SimulateQDQ: true}, inputs: []steps.Input{qdq, ref},
			report: golden(t, ToolEval, nil),
			argv: func(sc *steps.Context) []string {
				return []string{"/tools/vision_eval.py", "--set", "/data/eval.npz", "--predictions", preds(sc), "--reference", "/steps/ref/predictions.npy",
					"--onnx", "/steps/q/model.onnx", "--simulate-qdq"}
			},
			backend: "onnxruntime 1.31.1 CPUExecutionProvider"},
		{name: "openvino", p: &EvalParams{Runtime: RuntimeOpenVINO},
			inputs: []steps.Input{in(KindNNCFQuantize, "nncf-quantize:openvino-int8", "/steps/ov", map[string]string{"model": IRFile}), ref},
			report: golden(t, ToolOVEval, nil),
			argv: func(sc *steps.Context) []string {
				return []string{"/tools/openvino_vision_eval.py", "--set", "/data/eval.npz", "--predictions", preds(sc), "--reference", "/steps/ref/predictions.npy",
					"--model", "/steps/ov/model.xml", "--threads", "3"}
			},
			backend: "openvino 2026.4.1 CPU plugin (f32 inference precision, int8 where quantized)",
			check: func(t *testing.T, sc *steps.Context) {
				if sc.Result.Metrics["ms_per_image"] != 0.412 {
					t.Errorf("metrics %v: no ms_per_image", sc.Result.Metrics)
				}
			}},
		{name: "coreml-mil", p: &EvalParams{Runtime: RuntimeCoreMLMIL},
			inputs: []steps.Input{in(KindCoreMLConvert, "coreml-vision-convert:int8", "/steps/c8", map[string]string{"model": CoreMLPackage}), ref,
				in(KindCoreMLConvert, CoreMLProofStepID, "/steps/c32", map[string]string{"model": CoreMLPackage}), source},
			report: golden(t, ToolCoreMLEval, nil),
			argv: func(sc *steps.Context) []string {
				return []string{"/tools/coreml_vision_eval.py", "--set", "/data/eval.npz", "--predictions", preds(sc), "--reference", "/steps/ref/predictions.npy",
					"--package", "/steps/c8/model.mlpackage", "--fp32-package", "/steps/c32/model.mlpackage", "--torch", "/models/src"}
			},
			backend: "MIL interpreter (coreml_mil.py on PyTorch 2.7.0, CPU); Core ML did not run",
			check: func(t *testing.T, sc *steps.Context) {
				if c := sc.Result.Checks; len(c) != 1 || c[0].Name != "mil-interpreter-vs-pytorch" || !c[0].Passed {
					t.Errorf("checks %+v: want the interpreter's proof, passed", c)
				}
			}},
		{name: "qnn-htp, a subset", p: &EvalParams{Runtime: RuntimeQNNHTP, SoCModel: 57, HTPArch: 75, Images: 100},
			inputs: []steps.Input{in(KindQNNCompile, "vision-qnn-compile:snapdragon-8-gen-3:int8", "/steps/ctx", map[string]string{"model": "model_ctx.onnx"}), ref},
			report: qnnEvalReport(t, 100, func(e map[string]any) { e["reference_top1"] = 0.97 }),
			argv: func(sc *steps.Context) []string {
				return []string{"/tools/vision_qnn.py", "eval", "--set", "/data/eval.npz", "--predictions", preds(sc), "--reference", "/steps/ref/predictions.npy",
					"--model", "/steps/ctx/model_ctx.onnx", "--config", "/steps/ctx", "--soc-model", "57", "--htp-arch", "75", "--images", "100"}
			},
			backend: "QNN 2.51.0 HTP backend on the HTP simulator (x86-64), onnxruntime-qnn 2.7.0, onnxruntime 1.31.1, CPU fallback disabled",
			check: func(t *testing.T, sc *steps.Context) {
				// The reference's top-1 over the same 100 images, as the script reported it.
				if a := sc.Result.Accuracy; a.Images != 100 || *a.Reference != 0.97 || sc.Result.Metrics["eval_images"] != 100 {
					t.Errorf("accuracy %+v, metrics %v", a, sc.Result.Metrics)
				}
			}},
		{name: "litert", p: &EvalParams{Runtime: RuntimeLiteRT},
			inputs: []steps.Input{in(KindLiteRTConvert, "litert-convert:tflite-int8", "/steps/tfl", map[string]string{"model": TFLiteFile}), ref, source},
			report: []byte(`{"model": "/steps/tfl/model.tflite", "samples": 359, "top1": 0.9721, "correct": 349, "labelled": true, "ai_edge_litert": "2.3.0", "ms_per_image": 1.5, "seconds": 0.54, ` +
				`"input": {"dtype": "int8", "scale": 0.0186, "shape": [1, 3, 32, 32], "zero_point": -14}, "output": {"dtype": "int8", "scale": 0.107, "shape": [1, 10], "zero_point": 12}, ` +
				`"reference": {"agreement": 0.9916, "drop": 0.0084, "max_abs_logit_diff": null, "top1": 0.9805}}`),
			argv: func(sc *steps.Context) []string {
				return []string{"/tools/litert_validate.py", "--set", "/data/eval.npz", "--predictions", preds(sc), "--reference", "/steps/ref/predictions.npy",
					"--model", "/steps/tfl/model.tflite", "--config", "/models/src", "--threads", "3"}
			},
			backend: "LiteRT interpreter (ai-edge-litert 2.3.0, XNNPACK on the CPU)",
			check: func(t *testing.T, sc *steps.Context) {
				if a := sc.Result.Accuracy; a.Agreement == nil || *a.Agreement != 0.9916 || a.Images != 359 {
					t.Errorf("accuracy %+v", a)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := &fakeTool{report: tc.report}
			sc, err := runKind(t, visionEval{}, tc.p, tc.inputs, tool)
			if err != nil {
				t.Fatal(err)
			}
			sameArgv(t, tc.name, tool.argv, tc.argv(sc)...)
			a := sc.Result.Accuracy
			if a == nil || a.Backend != tc.backend || a.Top1 == 0 || sc.Result.Metrics["top1"] != a.Top1 {
				t.Fatalf("accuracy %+v, metrics %v", a, sc.Result.Metrics)
			}
			if tc.p.Runtime != RuntimeTorch && (a.Reference == nil || a.ReferenceBackend != "torch 2.11.0" || a.Agreement == nil) {
				t.Errorf("accuracy %+v: want the reference's top-1 and the agreement", a)
			}
			if tc.check != nil {
				tc.check(t, sc)
			}
		})
	}
}

func TestEvalKindRefuses(t *testing.T) {
	ref := reference(359, 0.9805)
	qdq := in(KindQuantize, "vision-quantize:int8", "/steps/q", map[string]string{"model": "model.onnx"})
	ctx := in(KindQNNCompile, "vision-qnn-compile:x:int8", "/steps/ctx", map[string]string{"model": "model_ctx.onnx"})
	c8 := in(KindCoreMLConvert, "coreml-vision-convert:int8", "/steps/c8", map[string]string{"model": CoreMLPackage})
	proof := in(KindCoreMLConvert, CoreMLProofStepID, "/steps/c32", map[string]string{"model": CoreMLPackage})
	for name, tc := range map[string]struct {
		p       *EvalParams
		inputs  []steps.Input
		report  []byte
		want    string
		noTools bool
	}{
		"unknown runtime": {&EvalParams{Runtime: "tensorflow"}, []steps.Input{qdq, ref}, nil,
			`runtime "tensorflow" is not torch, onnxruntime, litert, coreml-mil, qnn-htp or openvino`, true},
		"simulate_qdq elsewhere": {&EvalParams{Runtime: RuntimeOpenVINO, SimulateQDQ: true}, []steps.Input{qdq, ref}, nil,
			"simulate_qdq applies to the onnxruntime runtime only, not openvino", true},
		"no reference":      {&EvalParams{Runtime: RuntimeONNX}, []steps.Input{qdq}, nil, "needs, first, the step that made the model it scores, then the reference", true},
		"qnn without a SoC": {&EvalParams{Runtime: RuntimeQNNHTP}, []steps.Input{ctx, ref}, nil, "no QNN SoC model and HTP architecture", true},
		"coreml without its proof": {&EvalParams{Runtime: RuntimeCoreMLMIL}, []steps.Input{c8, ref, source}, nil,
			"needs coreml-vision-convert:fp32, the FP32 package the interpreter proves itself on", true},
		"another image count": {&EvalParams{Runtime: RuntimeONNX}, []steps.Input{qdq, reference(300, 0.98)}, golden(t, ToolEval, nil),
			"scored 359 images, the reference 300: they must score the same set", false},
		"labelled without top-1": {&EvalParams{Runtime: RuntimeONNX}, []steps.Input{qdq, ref}, golden(t, ToolEval, func(m map[string]any) { m["top1"] = nil }),
			"vision_eval.py scored no images", false},
		"qnn report without eval": {&EvalParams{Runtime: RuntimeQNNHTP, SoCModel: 57, HTPArch: 75}, []steps.Input{ctx, ref},
			golden(t, ToolQNN, func(m map[string]any) { m["eval"] = nil }), "vision_qnn.py eval reported no eval result", false},
		"qnn subset without the reference's top-1": {&EvalParams{Runtime: RuntimeQNNHTP, SoCModel: 57, HTPArch: 75, Images: 100}, []steps.Input{ctx, ref},
			qnnEvalReport(t, 100, func(e map[string]any) { e["reference_top1"] = nil }), "reported no reference top-1 on them", false},
		"an unproven interpreter": {&EvalParams{Runtime: RuntimeCoreMLMIL}, []steps.Input{c8, ref, proof, source},
			golden(t, ToolCoreMLEval, func(m map[string]any) { m["interpreter_proof"].(map[string]any)["images"] = 0 }),
			"did not prove its MIL interpreter on the FP32 package", false},
		"openvino's report from the onnx scorer": {&EvalParams{Runtime: RuntimeONNX}, []steps.Input{qdq, ref}, golden(t, ToolOVEval, nil),
			`vision_eval.py's report does not match what edgepipe reads: json: unknown field "ms_per_image"`, false},
	} {
		tool := &fakeTool{report: tc.report}
		_, err := runKind(t, visionEval{}, tc.p, tc.inputs, tool)
		wantErrors(t, name, err, tc.want)
		if tc.noTools && len(tool.argv) != 0 {
			t.Errorf("%s: ran %q before refusing", name, tool.argv)
		}
	}
}

// An unlabelled set has no top-1: agreement is the measure.
func TestEvalKindUnlabelled(t *testing.T) {
	report := golden(t, ToolEval, func(m map[string]any) { m["top1"], m["labelled"], m["correct"] = nil, false, 0 })
	sc, err := runKind(t, visionEval{}, &EvalParams{Runtime: RuntimeONNX},
		[]steps.Input{in(KindQuantize, "q", "/steps/q", map[string]string{"model": "model.onnx"}), reference(359, 0)}, &fakeTool{report: report})
	if err != nil {
		t.Fatal(err)
	}
	if a := sc.Result.Accuracy; !a.Unlabelled || a.Top1 != 0 || a.Agreement == nil {
		t.Errorf("accuracy %+v", a)
	}
	if _, ok := sc.Result.Metrics["top1"]; ok {
		t.Errorf("metrics %v: an unlabelled set has no top-1", sc.Result.Metrics)
	}
}

func TestNNCFQuantizeKind(t *testing.T) {
	ir := map[string]string{"model.xml": `<?xml version="1.0"?><net name="m" version="11"></net>`, "model.bin": "weights", "config.json": "{}"}
	p := &NNCFParams{Preset: "mixed", FastBiasCorrection: true, OverflowFix: "enable", Samples: 10, KeepStem: true}
	tool := &fakeTool{report: golden(t, ToolOVQuantize, nil), files: ir}
	sc, err := runKind(t, nncfQuantize{}, p, []steps.Input{exportIn}, tool)
	if err != nil {
		t.Fatal(err)
	}
	sameArgv(t, "nncf-quantize", tool.argv, "/tools/openvino_vision_quantize.py", "--in", "/steps/export/model.onnx", "--calibration", "/data/calibration.npz",
		"--out", sc.Out, "--preset", "mixed", "--overflow-fix", "enable", "--threads", "3", "--fast-bias-correction", "--keep-stem", "--samples", "10")
	r := sc.Result
	if r.Files["model"] != IRFile || r.Metrics["kept_float"] != 1 || r.Versions["nncf"] != "3.4.0" || !strings.Contains(r.Facts["cpu_plugin_layers"], "Convolution:u8 x33") {
		t.Errorf("result %+v", r)
	}
	for name, tc := range map[string]struct {
		p    *NNCFParams
		edit func(map[string]any)
		want string
	}{
		"preset":       {&NNCFParams{Preset: "fast", OverflowFix: "enable"}, nil, `preset "fast" is not performance or mixed`},
		"overflow_fix": {&NNCFParams{Preset: "mixed", OverflowFix: "always"}, nil, `overflow_fix "always" is not enable, first_layer or disable`},
		"another IR":   {p, func(m map[string]any) { m["model"] = "other.xml" }, `reported the model "other.xml", not model.xml`},
		"a float conv nobody asked for": {p, func(m map[string]any) { m["kept_float"] = []string{} },
			"1 of 54 convolutions kept float weights that no option asked to keep float"},
	} {
		tool := &fakeTool{report: golden(t, ToolOVQuantize, tc.edit), files: ir}
		_, err := runKind(t, nncfQuantize{}, tc.p, []steps.Input{exportIn}, tool)
		wantErrors(t, name, err, tc.want)
	}
}

func TestCoreMLConvertKind(t *testing.T) {
	src := source
	src.Dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(src.Dir, "config.json"), []byte(`{"labels": ["0", "1"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg := func(sc *steps.Context) string { return filepath.Join(sc.Out, CoreMLPackage) }

	tool := &fakeTool{report: golden(t, ToolCoreMLConvert, nil)}
	sc, err := runKind(t, coremlConvert{}, &CoreMLParams{Mode: "fp32"}, []steps.Input{src}, tool)
	if err != nil {
		t.Fatal(err)
	}
	sameArgv(t, "fp32", tool.argv, "/tools/coreml_vision_convert.py", "--model", src.Dir, "--out", pkg(sc), "--mode", "fp32")

	tool = &fakeTool{report: golden(t, ToolCoreMLConvert, nil)}
	p := &CoreMLParams{Mode: "int8", PerChannel: false, Samples: 50, KeepStem: true, Activations: "affine"}
	sc, err = runKind(t, coremlConvert{}, p, []steps.Input{src}, tool)
	if err != nil {
		t.Fatal(err)
	}
	sameArgv(t, "int8", tool.argv, "/tools/coreml_vision_convert.py", "--model", src.Dir, "--out", pkg(sc), "--mode", "int8",
		"--calibration", "/data/calibration.npz", "--per-tensor", "--samples", "50", "--keep-stem", "--activations", "affine")
	r := sc.Result
	if r.Files["model"] != CoreMLPackage || r.Metrics["quantize_ops"] != 88 || r.Facts["compute_precision"] != "fp16" ||
		!strings.Contains(r.Facts["format"], "the stem (input_1) in float") || r.Versions["coremltools"] != "9.0" {
		t.Errorf("result %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(sc.Out, "config.json")); err != nil || !strings.Contains(string(b), "labels") {
		t.Errorf("the source's config.json is not beside the package: %v", err)
	}

	for name, tc := range map[string]struct {
		p    *CoreMLParams
		edit func(map[string]any)
		want string
	}{
		"mode":        {&CoreMLParams{Mode: "int4"}, nil, `coreml-vision-convert: mode "int4" is not fp32 or int8`},
		"activations": {&CoreMLParams{Mode: "int8", Activations: "asymmetric"}, nil, `activations "asymmetric" is not symmetric or affine`},
		// The stem stayed float though nobody asked.
		"a float stem": {&CoreMLParams{Mode: "int8", Activations: "affine"}, nil, "51 of 52 convolutions have int8 weights"},
		"no conv":      {&CoreMLParams{Mode: "fp32"}, func(m map[string]any) { m["convs"] = 0 }, "reported no convolution"},
	} {
		tool := &fakeTool{report: golden(t, ToolCoreMLConvert, tc.edit)}
		_, err := runKind(t, coremlConvert{}, tc.p, []steps.Input{src}, tool)
		wantErrors(t, name, err, tc.want)
	}
}

func TestQNNKinds(t *testing.T) {
	onlyQuantize := func(edit func(q map[string]any)) []byte {
		return golden(t, ToolQNN, func(m map[string]any) {
			m["compile"], m["eval"] = nil, nil
			if edit != nil {
				edit(m["quantize"].(map[string]any))
			}
		})
	}
	tool := &fakeTool{report: onlyQuantize(nil)}
	sc, err := runKind(t, qnnQuantize{}, &QNNQuantizeParams{PerChannel: true}, []steps.Input{exportIn}, tool)
	if err != nil {
		t.Fatal(err)
	}
	sameArgv(t, "vision-qnn-quantize", tool.argv, "/tools/vision_qnn.py", "quantize", "--in", "/steps/export/model.onnx",
		"--calibration", "/data/calibration.npz", "--out", sc.Out)
	if m := sc.Result.Metrics; m["per_channel_weights"] != 54 || !strings.Contains(sc.Result.Facts["format"], "static input [1 3 32 32]") {
		t.Errorf("result %+v", sc.Result)
	}
	tool = &fakeTool{report: onlyQuantize(nil)}
	sc, _ = runKind(t, qnnQuantize{}, &QNNQuantizeParams{Samples: 20}, []steps.Input{exportIn}, tool)
	sameArgv(t, "vision-qnn-quantize per tensor", tool.argv, "/tools/vision_qnn.py", "quantize", "--in", "/steps/export/model.onnx",
		"--calibration", "/data/calibration.npz", "--out", sc.Out, "--per-tensor", "--samples", "20")
	for name, tc := range map[string]struct {
		report []byte
		want   string
	}{
		"compile's report":    {golden(t, ToolQNN, func(m map[string]any) { m["quantize"], m["eval"] = nil, nil }), "vision_qnn.py quantize reported no quantize result"},
		"a float conv":        {onlyQuantize(func(q map[string]any) { q["float_conv_gemm"] = 2 }), "2 Conv/Gemm/MatMul nodes kept float weights"},
		"no per-channel":      {onlyQuantize(func(q map[string]any) { q["per_channel_weights"] = 0 }), "no weight has a scale per channel"},
		"a dynamic batch":     {onlyQuantize(func(q map[string]any) { q["shape"] = []int{-1, 3, 32, 32} }), "not a static batch of 1"},
		"nothing quantized":   {onlyQuantize(func(q map[string]any) { q["dequantize_linear"] = 0 }), "nothing was quantized"},
		"a field of its own":  {onlyQuantize(func(q map[string]any) { q["scales"] = 3 }), `unknown field "scales"`},
		"a field it is short": {onlyQuantize(func(q map[string]any) { delete(q, "fixed_dims") }), "missing field(s) quantize.fixed_dims"},
	} {
		_, err := runKind(t, qnnQuantize{}, &QNNQuantizeParams{PerChannel: true}, []steps.Input{exportIn}, &fakeTool{report: tc.report})
		wantErrors(t, name, err, tc.want)
	}

	qdq := in(KindQNNQuantize, "vision-qnn-quantize:int8", "/steps/qdq", map[string]string{"model": "model.onnx"})
	ctxFiles := map[string]string{"model_ctx.onnx": "ctx", "model_ctx_qnn.bin": "binary", "config.json": "{}"}
	onlyCompile := golden(t, ToolQNN, func(m map[string]any) { m["quantize"], m["eval"] = nil, nil })
	p := &QNNCompileParams{Device: "snapdragon-8-gen-3", SoCModel: 57, HTPArch: 75}
	tool = &fakeTool{report: onlyCompile, files: ctxFiles}
	sc, err = runKind(t, qnnCompile{}, p, []steps.Input{qdq}, tool)
	if err != nil {
		t.Fatal(err)
	}
	sameArgv(t, "vision-qnn-compile", tool.argv, "/tools/vision_qnn.py", "compile", "--qdq", "/steps/qdq/model.onnx", "--out", sc.Out,
		"--soc-model", "57", "--htp-arch", "75")
	if r := sc.Result; r.Files["context_binary"] != "model_ctx_qnn.bin" || r.Versions["qnn"] != "2.51.0" || r.Versions["onnxruntime-qnn"] != "2.7.0" ||
		r.Metrics["context_binary_bytes"] != 2027520 {
		t.Errorf("result %+v", r)
	}
	tool = &fakeTool{report: onlyCompile, files: ctxFiles}
	_, err = runKind(t, qnnCompile{}, &QNNCompileParams{Device: "x86-laptop"}, []steps.Input{qdq}, tool)
	wantErrors(t, "no SoC", err, `no QNN SoC model and HTP architecture are known for device "x86-laptop"`)
	if len(tool.argv) != 0 {
		t.Errorf("compiled for no SoC: %q", tool.argv)
	}
	_, err = runKind(t, qnnCompile{}, p, []steps.Input{qdq}, &fakeTool{report: onlyCompile, files: map[string]string{"model_ctx.onnx": "ctx"}})
	wantErrors(t, "no binary", err, `wrote no EPContext model, context binary and config.json (missing "model_ctx_qnn.bin")`)
	_, err = runKind(t, qnnCompile{}, p, []steps.Input{qdq}, &fakeTool{report: golden(t, ToolQNN, func(m map[string]any) { m["compile"] = nil }), files: ctxFiles})
	wantErrors(t, "quantize's report", err, "vision_qnn.py compile reported no compile result")
}

func TestBenchKind(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), []byte("model bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	model := in(KindExport, "vision-export:fp32", dir, map[string]string{"model": "model.onnx"})
	// The golden: 2 warm-up and 5 timed runs of batch 1 on 2 threads.
	p := &BenchParams{Runtime: BenchONNXRuntime, Warmup: 2, Runs: 5, Batch: 1, Threads: 2}
	tool := &fakeTool{report: golden(t, "vision_benchlib.py", nil)}
	sc, err := runKind(t, visionBench{}, p, []steps.Input{model}, tool)
	if err != nil {
		t.Fatal(err)
	}
	sameArgv(t, "vision-bench", tool.argv, "/tools/vision_bench.py", "--model", filepath.Join(dir, "model.onnx"), "--config", dir,
		"--warmup", "2", "--runs", "5", "--batch", "1", "--threads", "2")
	vb := sc.Result.VisionBench
	if vb == nil || vb.TimedRuns != 5 || vb.Runtime != BenchONNXRuntime || vb.ModelBytes != int64(len("model bytes")) || vb.RuntimeVersion != "onnxruntime 1.31.1 CPUExecutionProvider" {
		t.Fatalf("bench %+v", vb)
	}
	if _, err := os.Stat(filepath.Join(sc.Out, "samples.json")); err != nil || sc.Result.Files["samples"] != "samples.json" {
		t.Errorf("no raw timings: %v", err)
	}
	// Threads 0: the step's grant (3), which the report must then say it ran on.
	tool = &fakeTool{report: golden(t, "vision_benchlib.py", nil)}
	_, err = runKind(t, visionBench{}, &BenchParams{Runtime: BenchOpenVINO, Warmup: 2, Runs: 5, Batch: 1}, []steps.Input{model}, tool)
	wantErrors(t, "the grant", err, "ran batch 1 on 2 threads, batch 1 on 3 were asked for")
	if len(tool.argv) != 1 || tool.argv[0][0] != "/tools/"+ToolOVBench || tool.argv[0][len(tool.argv[0])-1] != "3" {
		t.Errorf("openvino bench ran %q", tool.argv)
	}
	for name, tc := range map[string]struct {
		p    *BenchParams
		want string
	}{
		"runtime": {&BenchParams{Runtime: "tensorrt", Runs: 1, Batch: 1}, `runtime "tensorrt" is not one the vision bench runs: litert, onnxruntime, openvino`},
		"runs":    {&BenchParams{Runtime: BenchONNXRuntime, Runs: 0, Batch: 1}, "warmup 0, runs 0 and batch 1 must be >= 0, >= 1 and >= 1"},
	} {
		tool := &fakeTool{}
		_, err := runKind(t, visionBench{}, tc.p, []steps.Input{model}, tool)
		wantErrors(t, name, err, tc.want)
		if len(tool.argv) != 0 {
			t.Errorf("%s: ran %q", name, tool.argv)
		}
	}
}
