package standin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/mlc/report"
	shared "github.com/edgepipe/edgepipe/pipelines/shared/report"
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

	// The decode check, against the shared stand-in's reference for the
	// checkpoint; other weights decode otherwise.
	prompts := filepath.Join(dir, "prompts.json")
	os.WriteFile(prompts, []byte(`{"prompts": [{"id": "one", "messages": [{"role": "user", "content": "Answer with one word."}]}]}`), 0o644)
	if err := standin.Tools["generate_reference.py"]([]string{"--model", model, "--prompts", prompts, "--out", filepath.Join(dir, "ref")},
		&bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	decode := func(w string) shared.Decode {
		out.Reset()
		if err := mlcDecode([]string{"--mlc", w, "--model", model, "--reference", filepath.Join(dir, "ref", "reference.json")}, &out, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		var rep shared.Decode
		steptest.CheckReport(t, "mlc_decode.py", bytes.TrimSpace(out.Bytes()), &rep)
		return rep
	}
	a := decode(weights)
	if a.Sequences != 1 || a.Steps != 4 || a.DecodeMaxAbs == nil || len(a.PerSequence) != 1 {
		t.Fatalf("decode report %+v", a)
	}
	other := filepath.Join(dir, "weights32")
	if err := mlcNative([]string{"convert-weight", "--model", model, "--quantization", "q4f32_1", "--scales", "mse", "--out", other}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if b := decode(other); b.TokenAgreement == a.TokenAgreement && *b.MeanKL == *a.MeanKL {
		t.Errorf("two weights decoded alike: the stand-in ignores the shards")
	}
	if err := mlcDecode([]string{"--mlc", model, "--model", model, "--reference", filepath.Join(dir, "ref", "reference.json")}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("a checkpoint folder decoded as MLC shards")
	}
}
