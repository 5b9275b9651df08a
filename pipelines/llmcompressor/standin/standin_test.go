package standin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/llmcompressor/report"
	shared "github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps/steptest"
)

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
	ckpt := filepath.Join(dir, "ckpt")
	os.MkdirAll(ckpt, 0o755)
	os.WriteFile(filepath.Join(ckpt, "config.json"), []byte(`{"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2}`), 0o644)
	os.WriteFile(filepath.Join(ckpt, "model.safetensors"), []byte("weights of a small model, any bytes will do for the stand-ins"), 0o644)
	text := filepath.Join(dir, "text.txt")
	os.WriteFile(text, bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 200), 0o644)

	for _, tc := range []struct {
		scheme, rounding string
		actorder, grid   bool
	}{{"gptq", "gptq", true, false}, {"awq", "rtn", false, true}, {"awq", "gptq", true, true}} {
		out := filepath.Join(dir, tc.scheme+"-"+tc.rounding)
		var q report.Quantize
		steptest.CheckReport(t, "llmc_quantize.py", run(t, "llmc_quantize.py", "--model", ckpt, "--calibration", text, "--out", out,
			"--scheme", tc.scheme, "--group-size", "32", "--samples", "4", "--seq-len", "64", "--rounding", tc.rounding,
			"--v-down-bits", "8"), &q)
		if q.Samples != 4 || q.EightBitLinears != 2 || q.Format == nil || (q.ActOrder != nil) != tc.actorder ||
			(q.NGrid != nil) != tc.grid || (q.Rounding != nil) != (tc.scheme == "awq") {
			t.Fatalf("%s/%s quantize report %+v", tc.scheme, tc.rounding, q)
		}

		var p shared.Perplexity
		steptest.CheckReport(t, "llmc_perplexity.py", run(t, "llmc_perplexity.py", "--model", out, "--text", text, "--ctx", "64", "--chunks", "2"), &p)
		if p.PPL <= 0 || p.Chunks != 2 || p.Ctx != 64 {
			t.Fatalf("perplexity report %+v", p)
		}
	}

	// The decode check: the reference the shared stand-in generates for
	// the unconverted checkpoint, decoded by each quantized one.
	prompts := filepath.Join(dir, "prompts.json")
	os.WriteFile(prompts, []byte(`{"prompts": [{"id": "one", "messages": [{"role": "user", "content": "Answer with one word."}]},
		{"id": "two", "messages": [{"role": "user", "content": "Explain why the sea is salty."}]}], "window": {"id": "w", "instruction": "Summarise:"}}`), 0o644)
	run(t, "generate_reference.py", "--model", ckpt, "--prompts", prompts, "--out", filepath.Join(dir, "ref"), "--max-new-tokens", "5", "--text", text)
	ref := filepath.Join(dir, "ref", "reference.json")
	var a, b shared.Decode
	steptest.CheckReport(t, "llmc_decode.py", run(t, "llmc_decode.py", "--model", filepath.Join(dir, "gptq-gptq"), "--reference", ref), &a)
	steptest.CheckReport(t, "llmc_decode.py", run(t, "llmc_decode.py", "--model", filepath.Join(dir, "awq-rtn"), "--reference", ref), &b)
	if a.Sequences != 2 || a.Steps != 4+5 || a.MaxNewTokens != 5 || len(a.PerSequence) != 2 || a.StopsLikeOriginal == nil || a.CrossesWindow != nil {
		t.Fatalf("decode report %+v", a)
	}
	if a.TokenAgreement == b.TokenAgreement && *a.MeanKL == *b.MeanKL {
		t.Errorf("two checkpoints decoded alike (%v, %v): the stand-in ignores the artifact", a.TokenAgreement, *a.MeanKL)
	}
	var errs bytes.Buffer
	if err := standin.Tools["llmc_decode.py"]([]string{"--model", ckpt, "--reference", ref}, &bytes.Buffer{}, &errs); err == nil {
		t.Error("llmc_decode.py decoded a checkpoint that is not compressed-tensors")
	}
}
