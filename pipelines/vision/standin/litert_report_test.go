package standin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/data"
	litertreport "github.com/edgepipe/edgepipe/pipelines/litert/report"
	"github.com/edgepipe/edgepipe/steps/steptest"
)

// The LiteRT stand-ins write the reports litert-convert decodes strictly
// (and vision-eval reads): pipelines/litert/report's types, which the
// goldens and the Python writers are checked against too.
func TestLiteRTReportsDecodeStrictly(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	os.MkdirAll(model, 0o755)
	os.WriteFile(filepath.Join(model, "config.json"), []byte(`{"architecture": "mobilenet_v3_small", "num_classes": 10, "input_size": 32, "in_channels": 3, "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}`), 0o644)
	os.WriteFile(filepath.Join(model, "model.safetensors"), []byte("stand-in classifier weights"), 0o644)
	set := func(name string) string {
		p, err := data.Materialize(name, dir)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tflite := filepath.Join(dir, "model.tflite")
	var out bytes.Buffer
	if err := litertConvert([]string{"--model", model, "--out", tflite, "--mode", "int8", "--calibration", set("digits-calibration"), "--samples", "32"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var c litertreport.Convert
	steptest.CheckReport(t, "litert_convert.py", bytes.TrimSpace(out.Bytes()), &c)
	if c.CalibrationSamples != 32 || !c.PerChannel || c.Input.Shape[2] != 32 || c.Output.Shape[1] != 10 || c.Weights["int8"] == 0 {
		t.Fatalf("convert report %+v", c)
	}

	// Labelled, against a reference's predictions: top-1, and the
	// reference's top-1 and the drop from it.
	test := set("digits-test")
	ref := filepath.Join(dir, "ref.npy")
	s, err := readImageSet(test)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeInt64NPY(ref, s.Labels); err != nil { // a reference right on every image
		t.Fatal(err)
	}
	out.Reset()
	if err := litertValidate([]string{"--model", tflite, "--set", test, "--config", model, "--reference", ref}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var v litertreport.Validate
	steptest.CheckReport(t, "litert_validate.py", bytes.TrimSpace(out.Bytes()), &v)
	r := v.Reference
	if v.Top1 == nil || !v.Labelled || r == nil || r.Top1 == nil || *r.Top1 != 1 || r.Drop == nil || *r.Drop != 1-*v.Top1 || r.Agreement != *v.Top1 {
		t.Fatalf("validate report %+v, reference %+v", v, r)
	}

	// Unlabelled, without a reference: no top-1, no comparison.
	out.Reset()
	if err := litertValidate([]string{"--model", tflite, "--set", set("skimage-photos"), "--config", model}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	v = litertreport.Validate{}
	steptest.CheckReport(t, "litert_validate.py", bytes.TrimSpace(out.Bytes()), &v)
	if v.Top1 != nil || v.Correct != nil || v.Labelled || v.Reference != nil || v.Samples == 0 {
		t.Fatalf("unlabelled report %+v", v)
	}
}
