package standin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/pipelines/mlc/report"
	"github.com/edgepipe/edgepipe/steps/steptest"
)

// The stand-ins write the reports the kinds decode strictly (and the
// digests file the WebGPU check reads): the same types the goldens and the
// Python writers are checked against.
func TestStandInReportsDecodeStrictly(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if err := tinyLlama([]string{model}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	weights := filepath.Join(dir, "weights")
	var out bytes.Buffer
	if err := mlcNative([]string{"convert-weight", "--model", model, "--quantization", "q4f16_1", "--scales", "mse", "--out", weights}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var n report.Native
	steptest.CheckReport(t, "mlc_native.py", bytes.TrimSpace(out.Bytes()), &n)
	cw := n.ConvertWeight
	if cw == nil || n.GenConfig != nil || cw.Shards == 0 || cw.Params == 0 || cw.TotalParams == 0 || cw.Scales != "mse" {
		t.Fatalf("convert-weight report %+v %+v", n, cw)
	}

	out.Reset()
	if err := mlcNative([]string{"gen-config", "--model", model, "--quantization", "q4f16_1", "--conv-template", "chatml",
		"--context-window-size", "1024", "--out", filepath.Join(dir, "config")}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	n = report.Native{}
	steptest.CheckReport(t, "mlc_native.py", bytes.TrimSpace(out.Bytes()), &n)
	if gc := n.GenConfig; gc == nil || n.ConvertWeight != nil || gc.ContextWindowSize != 1024 || gc.ConvTemplate != "chatml" {
		t.Fatalf("gen-config report %+v", n)
	}

	text := filepath.Join(dir, "eval.txt")
	os.WriteFile(text, bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 200), 0o644)
	digests := filepath.Join(dir, "decoded.json")
	out.Reset()
	if err := mlcGate([]string{"--mlc", weights, "--model", model, "--text", text, "--ctx", "64", "--digests", digests}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var g report.Gate
	steptest.CheckReport(t, "mlc_gate.py", bytes.TrimSpace(out.Bytes()), &g)
	if g.Ctx != 64 || g.Tensors == 0 || g.ParamBytes == nil || !(g.PPL > 0) || g.KLDivergence != nil || g.Top1Agreement != nil {
		t.Fatalf("gate report %+v", g)
	}
	b, err := os.ReadFile(digests)
	if err != nil {
		t.Fatal(err)
	}
	var d report.Digests
	steptest.CheckReport(t, "mlc_gate.py --digests", b, &d)
	if len(d.Tensors) != g.Tensors {
		t.Fatalf("%d digests, the report says %d tensors", len(d.Tensors), g.Tensors)
	}
}
