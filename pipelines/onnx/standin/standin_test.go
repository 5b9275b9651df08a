package standin

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/internal/pplstat"
	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/onnx/report"
	shared "github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps/steptest"
)

// checkpoint writes a small Hugging Face checkpoint the stand-ins accept.
func checkpoint(t *testing.T, dir string) string {
	t.Helper()
	ckpt := filepath.Join(dir, "ckpt")
	if err := os.MkdirAll(ckpt, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"config.json":       `{"hidden_size": 64, "num_hidden_layers": 2}`,
		"model.safetensors": "weights of a small model, any bytes will do for the stand-ins",
		"tokenizer.json":    `{}`,
	} {
		if err := os.WriteFile(filepath.Join(ckpt, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ckpt
}

// baselineScores writes what the hf-perplexity stand-in leaves for n
// scored tokens, and returns its folder.
func baselineScores(t *testing.T, dir string, n int) string {
	t.Helper()
	base := filepath.Join(dir, "baseline")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	f := standin.AddScoreFlags(fs)
	if err := fs.Parse([]string{"--scores-out", base, "--keep-topk"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Scores(21, n, []byte("the baseline")); err != nil {
		t.Fatal(err)
	}
	return base
}

// run runs a stand-in tool and returns its last output line.
func run(t *testing.T, tool string, args ...string) []byte {
	t.Helper()
	var out, errs bytes.Buffer
	if err := standin.Tools[tool](args, &out, &errs); err != nil {
		t.Fatalf("%s: %v\n%s", tool, err, errs.String())
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	return lines[len(lines)-1]
}

// The stand-ins write the reports the kinds decode strictly: the same
// types the goldens and the Python writers are checked against.
func TestStandInReportsDecodeStrictly(t *testing.T) {
	dir := t.TempDir()
	ckpt := checkpoint(t, dir)
	text := filepath.Join(dir, "eval.txt")
	os.WriteFile(text, bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 200), 0o644)

	fp32 := filepath.Join(dir, "fp32")
	var e report.Export
	steptest.CheckReport(t, "onnx_export.py", run(t, "onnx_export.py", "--model", ckpt, "--out", fp32, "--opset", "18"), &e)
	if e.Model != "model.onnx" || e.KVLayers != 2 || !e.KVCache || e.Bytes == 0 || len(e.Files) < 3 {
		t.Fatalf("export report %+v", e)
	}

	int4 := filepath.Join(dir, "int4")
	var q report.Quantize
	steptest.CheckReport(t, "onnx_quantize.py", run(t, "onnx_quantize.py", "--in", filepath.Join(fp32, e.Model), "--out", int4,
		"--block-size", "32", "--lm-head-bits", "8", "--v-down-bits", "8"), &q)
	if q.MatMulNBits == 0 || q.LMHeadBits == nil || *q.LMHeadBits != 8 || q.EightBitLayers != 4 || q.Bytes == 0 {
		t.Fatalf("quantize report %+v", q)
	}

	var v report.Validate
	steptest.CheckReport(t, "onnx_validate.py", run(t, "onnx_validate.py", "--onnx", filepath.Join(int4, q.Model), "--hf", ckpt,
		"--text", text, "--ctx", "64", "--chunks", "4"), &v)
	if v.PPL <= 0 || v.Chunks != 4 || v.Ctx != 64 || !v.Ran() || v.KLDivergence != nil || v.BaselineTop1 != nil {
		t.Fatalf("validate report %+v", v)
	}
	// Against a baseline's scores: its own per-token file, and KL and
	// top-1 agreement from both.
	base, scores := baselineScores(t, dir, v.Scored), filepath.Join(dir, "scores")
	os.Mkdir(scores, 0o755)
	steptest.CheckReport(t, "onnx_validate.py", run(t, "onnx_validate.py", "--onnx", filepath.Join(int4, q.Model), "--hf", ckpt,
		"--text", text, "--ctx", "64", "--chunks", "4", "--scores-out", scores, "--baseline-scores", base), &v)
	if v.KLDivergence == nil || v.BaselineTop1 == nil || *v.KLDivergence <= 0 {
		t.Fatalf("validate report against the baseline %+v", v)
	}
	if nll, err := pplstat.ReadNLL(filepath.Join(scores, pplstat.NLLFile)); err != nil || len(nll) != v.Scored {
		t.Fatalf("scores.nll: %d values (%v), want %d", len(nll), err, v.Scored)
	}

	var b report.Bench
	steptest.CheckReport(t, "onnx_bench.py", run(t, "onnx_bench.py", "--onnx", filepath.Join(int4, q.Model), "--prompt-tokens", "16",
		"--runs", "3", "--threads", "2"), &b)
	if len(b.PromptNS) != 3 || len(b.DecodeNS) != 3 || b.KVLayers != 2 {
		t.Fatalf("bench report %+v", b)
	}
	// The decode check, against the shared stand-in's reference for the
	// checkpoint: each model decodes otherwise, and a graph without past
	// key/values is refused as the real helper refuses it.
	prompts := filepath.Join(dir, "prompts.json")
	os.WriteFile(prompts, []byte(`{"prompts": [{"id": "one", "messages": [{"role": "user", "content": "Answer with one word."}]},
		{"id": "two", "messages": [{"role": "user", "content": "Explain why the sea is salty."}]}]}`), 0o644)
	run(t, "generate_reference.py", "--model", ckpt, "--prompts", prompts, "--out", filepath.Join(dir, "ref"), "--max-new-tokens", "5")
	ref := filepath.Join(dir, "ref", "reference.json")
	var d32, d4 shared.Decode
	steptest.CheckReport(t, "onnx_decode.py", run(t, "onnx_decode.py", "--onnx", filepath.Join(fp32, e.Model), "--reference", ref, "--threads", "1"), &d32)
	steptest.CheckReport(t, "onnx_decode.py", run(t, "onnx_decode.py", "--onnx", filepath.Join(int4, q.Model), "--reference", ref), &d4)
	if d32.Sequences != 2 || d32.MaxNewTokens != 5 || len(d32.PerSequence) != 2 || d32.DecodeMaxAbs == nil || d32.NotApplicable != nil {
		t.Fatalf("decode report %+v", d32)
	}
	if d32.TokenAgreement == d4.TokenAgreement && *d32.MeanKL == *d4.MeanKL {
		t.Errorf("fp32 and int4 decoded alike (%v, %v): the stand-in ignores the model", d32.TokenAgreement, *d32.MeanKL)
	}
	noPast := filepath.Join(dir, "nopast")
	run(t, "onnx_export.py", "--model", ckpt, "--out", noPast, "--no-past")
	var errs bytes.Buffer
	if err := standin.Tools["onnx_decode.py"]([]string{"--onnx", filepath.Join(noPast, "model.onnx"), "--reference", ref}, &bytes.Buffer{}, &errs); err == nil {
		t.Error("onnx_decode.py decoded a graph exported without its KV cache")
	}
	if err := standin.Tools["onnx_decode.py"]([]string{"--onnx", filepath.Join(fp32, e.Model), "--reference", prompts}, &bytes.Buffer{}, &errs); err == nil {
		t.Error("onnx_decode.py decoded against a file that is not a reference")
	}
}
