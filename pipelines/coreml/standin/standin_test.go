package standin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/internal/pplstat"
	"github.com/edgepipe/edgepipe/internal/standin"
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
	if len(v.Checks) != 2 || !v.Checks[1].Passed || v.CoreMLPPL != nil || v.Ctx != 64 || !(v.PPL > v.BaselinePPL) ||
		v.KLDivergence == nil || !(*v.KLDivergence > 0) || v.Top1Agreement == nil || v.CoreMLKLDivergence != nil {
		t.Fatalf("report %+v", v)
	}

	// With --scores-out: both models' per-token scores, the baseline's
	// top tokens beside its own.
	scores := filepath.Join(dir, "scores")
	os.Mkdir(scores, 0o755)
	out.Reset()
	if err := coremlValidate([]string{"--package", pkg, "--model", model, "--text", text, "--ctx", "64", "--mode", "symmetric", "--v-down-bits", "8",
		"--scores-out", scores}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	steptest.CheckReport(t, "coreml_validate.py", bytes.TrimSpace(out.Bytes()), &v)
	for _, f := range []string{pplstat.NLLFile, filepath.Join("baseline", pplstat.NLLFile)} {
		if nll, err := pplstat.ReadNLL(filepath.Join(scores, f)); err != nil || len(nll) != v.Scored {
			t.Fatalf("%s: %d values (%v), want %d", f, len(nll), err, v.Scored)
		}
	}
	if _, err := os.Stat(filepath.Join(scores, "baseline", standin.TopKFile)); err != nil {
		t.Fatal(err)
	}
}
