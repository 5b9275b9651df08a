package standin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/pipelines/coreml/report"
	"github.com/edgepipe/edgepipe/steps/steptest"
)

// The stand-ins write the reports the kinds decode strictly: the same
// types the goldens and the Python writers are checked against.
func TestStandInReportsDecodeStrictly(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(model, "config.json"), []byte(`{"architectures": ["LlamaForCausalLM"]}`), 0o644)
	os.WriteFile(filepath.Join(model, "model.safetensors"), bytes.Repeat([]byte("weights "), 512), 0o644)
	pkg := filepath.Join(dir, "model.mlpackage")
	var out bytes.Buffer
	if err := coremlConvert([]string{"--model", model, "--out", pkg, "--context", "64", "--mode", "symmetric", "--v-down-bits", "8"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var c report.Convert
	steptest.CheckReport(t, "coreml_convert.py", bytes.TrimSpace(out.Bytes()), &c)
	if c.Context != 64 || c.Mode != "symmetric" || c.KVCache != "stateful" || c.SlidingWindow != nil {
		t.Fatalf("report %+v", c)
	}

	text := filepath.Join(dir, "eval.txt")
	os.WriteFile(text, bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 200), 0o644)
	out.Reset()
	if err := coremlValidate([]string{"--package", pkg, "--model", model, "--text", text, "--ctx", "64", "--mode", "symmetric", "--v-down-bits", "8"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var v report.Validate
	steptest.CheckReport(t, "coreml_validate.py", bytes.TrimSpace(out.Bytes()), &v)
	if len(v.Checks) != 2 || !v.Checks[1].Passed || v.CoreMLPPL != nil || v.Ctx != 64 || !(v.PPL > v.BaselinePPL) {
		t.Fatalf("report %+v", v)
	}
}
