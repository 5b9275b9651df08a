package standin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/vision/report"
	"github.com/edgepipe/edgepipe/steps/steptest"
)

// runTool runs a stand-in as edgepipe would and returns its report line,
// the last line of its output.
func runTool(t *testing.T, tool string, args ...string) []byte {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := standin.Tools[tool](args, &out, &errOut); err != nil {
		t.Fatalf("%s %v: %v\n%s", tool, args, err, errOut.String())
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	return lines[len(lines)-1]
}

// classifier writes a model folder the stand-ins take: config.json and
// some weights.
func classifier(t *testing.T, dir string) string {
	t.Helper()
	model := filepath.Join(dir, "model")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `{"architecture": "mobilenet_v3_small", "num_classes": 10, "input_size": 32, "in_channels": 3, "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}`
	if err := os.WriteFile(filepath.Join(model, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(model, "model.safetensors"), bytes.Repeat([]byte("stand-in weights "), 512), 0o644); err != nil {
		t.Fatal(err)
	}
	return model
}

func dataSet(t *testing.T, name, dir string) string {
	t.Helper()
	p, err := data.Materialize(name, dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The stand-ins write the reports the kinds decode strictly: the same
// types the goldens and the Python writers are checked against, through
// the chain of steps a recipe runs (each stand-in reads what the one
// before it wrote).
func TestStandInReportsDecodeStrictly(t *testing.T) {
	dir := t.TempDir()
	model := classifier(t, dir)
	test, cal := dataSet(t, "digits-test", dir), dataSet(t, "digits-calibration", dir)

	var ex report.Export
	steptest.CheckReport(t, "vision_export.py", runTool(t, "vision_export.py", "--model", model, "--set", test, "--out", filepath.Join(dir, "fp32")), &ex)
	if !ex.DynamicBatch || ex.CheckedImages == 0 || ex.Model != "model.onnx" {
		t.Errorf("export report %+v", ex)
	}
	fp32 := filepath.Join(dir, "fp32", ex.Model)

	var q report.Quantize
	steptest.CheckReport(t, "vision_quantize.py", runTool(t, "vision_quantize.py", "--in", fp32, "--calibration", cal, "--out", filepath.Join(dir, "int8"),
		"--keep-stem", "--samples", "50"), &q)
	if q.CalibrationImages != 50 || q.KeptFloat != 1 || !q.PerChannel {
		t.Errorf("quantize report %+v", q)
	}

	refPred := filepath.Join(dir, "ref.npy")
	var ref report.Eval
	steptest.CheckReport(t, "vision_eval.py", runTool(t, "vision_eval.py", "--set", test, "--torch", model, "--predictions", refPred), &ref)
	if ref.Top1 == nil || !ref.Labelled || ref.Agreement != nil || ref.Images == 0 {
		t.Errorf("reference report %+v", ref)
	}
	var ev report.Eval
	steptest.CheckReport(t, "vision_eval.py", runTool(t, "vision_eval.py", "--set", test, "--onnx", filepath.Join(dir, "int8", q.Model),
		"--predictions", filepath.Join(dir, "int8.npy"), "--reference", refPred), &ev)
	if ev.Top1 == nil || ev.Agreement == nil || ev.Images != ref.Images {
		t.Errorf("int8 eval report %+v", ev)
	}
	// An unlabelled set: no top-1, agreement only.
	photos := dataSet(t, "skimage-photos", dir)
	var un report.Eval
	steptest.CheckReport(t, "vision_eval.py", runTool(t, "vision_eval.py", "--set", photos, "--torch", model, "--predictions", filepath.Join(dir, "photos.npy")), &un)
	if un.Top1 != nil || un.Labelled || un.Correct != 0 {
		t.Errorf("unlabelled eval report %+v", un)
	}

	var ov report.OpenVINOQuantize
	steptest.CheckReport(t, "openvino_vision_quantize.py", runTool(t, "openvino_vision_quantize.py", "--in", fp32, "--calibration", cal,
		"--out", filepath.Join(dir, "ir"), "--keep-stem"), &ov)
	if len(ov.KeptFloat) != 1 || ov.Int8Convolutions+1 != ov.Convolutions {
		t.Errorf("openvino quantize report %+v", ov)
	}
	ir := filepath.Join(dir, "ir", ov.Model)
	var ove report.OpenVINOEval
	steptest.CheckReport(t, "openvino_vision_eval.py", runTool(t, "openvino_vision_eval.py", "--model", ir, "--set", test,
		"--predictions", filepath.Join(dir, "ov.npy"), "--reference", refPred), &ove)
	if ove.Agreement == nil || ove.Images != ref.Images {
		t.Errorf("openvino eval report %+v", ove)
	}

	// The bench protocol, as each runtime's script prints it.
	for tool, m := range map[string]string{"vision_bench.py": fp32, "openvino_vision_bench.py": ir} {
		var b report.Bench
		steptest.CheckReport(t, "vision_benchlib.py", runTool(t, tool, "--model", m, "--config", filepath.Dir(m), "--warmup", "2", "--runs", "3",
			"--batch", "2", "--threads", "1"), &b)
		if len(b.LatencyNS) != 5 || b.Batch != 2 || b.InputShape[0] != 2 {
			t.Errorf("%s report %+v", tool, b)
		}
	}

	var fp32Pkg, int8Pkg report.CoreMLConvert
	steptest.CheckReport(t, "coreml_vision_convert.py", runTool(t, "coreml_vision_convert.py", "--model", model,
		"--out", filepath.Join(dir, "fp32.mlpackage"), "--mode", "fp32"), &fp32Pkg)
	steptest.CheckReport(t, "coreml_vision_convert.py", runTool(t, "coreml_vision_convert.py", "--model", model,
		"--out", filepath.Join(dir, "int8.mlpackage"), "--mode", "int8", "--calibration", cal, "--keep-stem", "--activations", "affine"), &int8Pkg)
	if fp32Pkg.Activations != "" || fp32Pkg.ComputePrecision != "fp32" || len(int8Pkg.KeptFloat) != 1 || int8Pkg.Activations != "affine" {
		t.Errorf("coreml convert reports %+v, %+v", fp32Pkg, int8Pkg)
	}
	var ce report.CoreMLEval
	steptest.CheckReport(t, "coreml_vision_eval.py", runTool(t, "coreml_vision_eval.py", "--package", int8Pkg.Model, "--fp32-package", fp32Pkg.Model,
		"--torch", model, "--set", test, "--predictions", filepath.Join(dir, "coreml.npy"), "--reference", refPred), &ce)
	if !ce.InterpreterProof.Passed || ce.RanCoreML || ce.Agreement == nil {
		t.Errorf("coreml eval report %+v", ce)
	}

	// vision_qnn.py: each subcommand's result under its name, the others null.
	var qq, qc, qe report.QNN
	steptest.CheckReport(t, "vision_qnn.py", runTool(t, "vision_qnn.py", "quantize", "--in", fp32, "--calibration", cal, "--out", filepath.Join(dir, "qdq")), &qq)
	if qq.Quantize == nil || qq.Compile != nil || qq.Eval != nil || qq.Quantize.Shape[0] != 1 {
		t.Fatalf("qnn quantize report %+v", qq)
	}
	soc := []string{"--soc-model", "57", "--htp-arch", "75"}
	steptest.CheckReport(t, "vision_qnn.py", runTool(t, "vision_qnn.py", append([]string{"compile", "--qdq", filepath.Join(dir, "qdq", qq.Quantize.Model),
		"--out", filepath.Join(dir, "ctx")}, soc...)...), &qc)
	if qc.Compile == nil || qc.Quantize != nil || qc.Eval != nil || qc.Compile.HTPArch != 75 {
		t.Fatalf("qnn compile report %+v", qc)
	}
	steptest.CheckReport(t, "vision_qnn.py", runTool(t, "vision_qnn.py", append([]string{"eval", "--model", filepath.Join(dir, "ctx", qc.Compile.Model),
		"--set", test, "--config", filepath.Join(dir, "ctx"), "--predictions", filepath.Join(dir, "qnn.npy"), "--reference", refPred, "--images", "20"}, soc...)...), &qe)
	if qe.Eval == nil || qe.Quantize != nil || qe.Compile != nil || qe.Eval.Images != 20 || qe.Eval.SetImages != ref.Images || qe.Eval.ReferenceTop1 == nil {
		t.Fatalf("qnn eval report %+v", qe)
	}
}
