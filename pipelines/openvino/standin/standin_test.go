package standin

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/internal/pplstat"
	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/openvino/report"
	shared "github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps/steptest"
)

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
	ckpt := filepath.Join(dir, "ckpt")
	os.MkdirAll(ckpt, 0o755)
	os.WriteFile(filepath.Join(ckpt, "config.json"), []byte(`{"hidden_size": 64, "num_hidden_layers": 2}`), 0o644)
	os.WriteFile(filepath.Join(ckpt, "model.safetensors"), []byte("weights of a small model, any bytes will do for the stand-ins"), 0o644)
	text := filepath.Join(dir, "text.txt")
	os.WriteFile(text, bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 200), 0o644)

	export := filepath.Join(dir, "export")
	var e report.Export
	steptest.CheckReport(t, "openvino_export.py", run(t, "openvino_export.py", "--model", ckpt, "--out", export, "--threads", "2"), &e)
	if e.Model != "openvino_model.xml" || !e.Stateful || e.Weights["f32"].Bytes == 0 || len(e.Files) < 3 {
		t.Fatalf("export report %+v", e)
	}

	int4 := filepath.Join(dir, "int4")
	var q report.Quantize
	steptest.CheckReport(t, "openvino_quantize.py", run(t, "openvino_quantize.py", "--in", export, "--out", int4, "--weight-format", "int4",
		"--sym", "--group-size", "32", "--awq", "--calibration", text, "--samples", "4", "--seq-len", "64"), &q)
	if q.Weights["u4"].Elements == 0 || q.CalibrationSamples != 4 || q.Config["bits"] != 4.0 || q.Config["quant_method"] != "awq" {
		t.Fatalf("quantize report %+v", q)
	}

	var v report.Validate
	steptest.CheckReport(t, "openvino_validate.py", run(t, "openvino_validate.py", "--ir", int4, "--hf", ckpt, "--text", text,
		"--ctx", "64", "--chunks", "2"), &v)
	if v.Chunks != 2 || v.Device != "CPU" || !v.Ran() || v.KLDivergence != nil || v.BaselineTop1 != nil {
		t.Fatalf("validate report %+v", v)
	}
	// Against a baseline's scores: its own per-token file, and KL and
	// top-1 agreement from both.
	base, scores := baselineScores(t, dir, v.Scored), filepath.Join(dir, "scores")
	os.Mkdir(scores, 0o755)
	steptest.CheckReport(t, "openvino_validate.py", run(t, "openvino_validate.py", "--ir", int4, "--hf", ckpt, "--text", text,
		"--ctx", "64", "--chunks", "2", "--scores-out", scores, "--baseline-scores", base), &v)
	if v.KLDivergence == nil || v.BaselineTop1 == nil || *v.KLDivergence <= 0 {
		t.Fatalf("validate report against the baseline %+v", v)
	}
	if nll, err := pplstat.ReadNLL(filepath.Join(scores, pplstat.NLLFile)); err != nil || len(nll) != v.Scored {
		t.Fatalf("scores.nll: %d values (%v), want %d", len(nll), err, v.Scored)
	}
	steptest.CheckReport(t, "openvino_validate.py", run(t, "openvino_validate.py", "--ir", int4, "--hf", ckpt, "--text", text,
		"--ctx", "64", "--no-logits-check"), &v)
	if v.MaxAbs != nil || v.Ran() {
		t.Fatalf("validate report without the logits check %+v", v)
	}

	var b report.Bench
	steptest.CheckReport(t, "openvino_bench.py", run(t, "openvino_bench.py", "--ir", int4, "--prompt-tokens", "16", "--runs", "3", "--threads", "2"), &b)
	if len(b.PromptNS) != 3 || len(b.DecodeNS) != 3 || b.Device != "CPU" {
		t.Fatalf("bench report %+v", b)
	}
	// The decode check, against the shared stand-in's reference for the
	// checkpoint: the export and its compression decode otherwise, and a
	// folder that is not an IR is refused.
	prompts := filepath.Join(dir, "prompts.json")
	os.WriteFile(prompts, []byte(`{"prompts": [{"id": "one", "messages": [{"role": "user", "content": "Answer with one word."}]},
		{"id": "two", "messages": [{"role": "user", "content": "Explain why the sea is salty."}]}]}`), 0o644)
	run(t, "generate_reference.py", "--model", ckpt, "--prompts", prompts, "--out", filepath.Join(dir, "ref"), "--max-new-tokens", "5")
	ref := filepath.Join(dir, "ref", "reference.json")
	var d32, d4 shared.Decode
	steptest.CheckReport(t, "openvino_decode.py", run(t, "openvino_decode.py", "--ir", export, "--reference", ref, "--threads", "1"), &d32)
	steptest.CheckReport(t, "openvino_decode.py", run(t, "openvino_decode.py", "--ir", int4, "--reference", ref), &d4)
	if d4.Sequences != 2 || d4.MaxNewTokens != 5 || len(d4.PerSequence) != 2 || d4.DecodeMaxAbs == nil || d4.NotApplicable != nil {
		t.Fatalf("decode report %+v", d4)
	}
	if d32.TokenAgreement == d4.TokenAgreement && *d32.MeanKL == *d4.MeanKL {
		t.Errorf("the export and its INT4 decoded alike (%v, %v): the stand-in ignores the IR", d4.TokenAgreement, *d4.MeanKL)
	}
	var errs bytes.Buffer
	if err := standin.Tools["openvino_decode.py"]([]string{"--ir", ckpt, "--reference", ref}, &bytes.Buffer{}, &errs); err == nil {
		t.Error("openvino_decode.py decoded a checkpoint folder as an IR")
	}
}
