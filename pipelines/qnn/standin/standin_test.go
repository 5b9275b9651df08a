package standin

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/internal/pplstat"
	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/qnn/report"
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
	os.WriteFile(filepath.Join(ckpt, "config.json"), []byte(`{"hidden_size": 64, "num_hidden_layers": 2}`), 0o644)
	os.WriteFile(filepath.Join(ckpt, "model.safetensors"), []byte("weights of a small model, any bytes will do for the stand-ins"), 0o644)
	text := filepath.Join(dir, "text.txt")
	os.WriteFile(text, bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 200), 0o644)
	prefill := filepath.Join(dir, "prefill")
	run(t, "onnx_export.py", "--model", ckpt, "--out", prefill, "--no-past")

	qdqDir := filepath.Join(dir, "qdq")
	var q report.QDQ
	steptest.CheckReport(t, "qnn_qdq.py", run(t, "qnn_qdq.py", "--onnx", filepath.Join(prefill, "model.onnx"), "--tokenizer", ckpt,
		"--calibration", text, "--out", qdqDir, "--seq-len", "64", "--weight-type", "int8", "--static-inputs", "--per-channel"), &q)
	if q.DequantizeLinear == 0 || len(q.StaticInputs) != 2 || q.PerChannelConvs == 0 || q.Bytes == 0 {
		t.Fatalf("qdq report %+v", q)
	}

	var h report.HTP
	steptest.CheckReport(t, "qnn_htp.py", run(t, "qnn_htp.py", "--qdq", filepath.Join(qdqDir, q.Model), "--hf", ckpt, "--text", text,
		"--out", filepath.Join(dir, "htp"), "--ctx", "64", "--chunks", "2", "--soc-model", "57", "--htp-arch", "75"), &h)
	if h.Gate == nil || !h.Gate.Ran() || h.Gate.Chunks != 2 || h.SoCModel != 57 || h.QNNVersion == "" || h.Gate.KLDivergence != nil {
		t.Fatalf("htp report %+v %+v", h, h.Gate)
	}
	// Against a baseline's scores: its own per-token file, and KL and
	// top-1 agreement from both.
	base, scores := filepath.Join(dir, "baseline"), filepath.Join(dir, "scores")
	os.Mkdir(base, 0o755)
	os.Mkdir(scores, 0o755)
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	bf := standin.AddScoreFlags(fs)
	if err := fs.Parse([]string{"--scores-out", base, "--keep-topk"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := bf.Scores(21, h.Gate.Scored, []byte("the baseline")); err != nil {
		t.Fatal(err)
	}
	steptest.CheckReport(t, "qnn_htp.py", run(t, "qnn_htp.py", "--qdq", filepath.Join(qdqDir, q.Model), "--hf", ckpt, "--text", text,
		"--out", filepath.Join(dir, "htp"), "--ctx", "64", "--chunks", "2", "--soc-model", "57", "--htp-arch", "75",
		"--scores-out", scores, "--baseline-scores", base), &h)
	if h.Gate.KLDivergence == nil || h.Gate.BaselineTop1 == nil || *h.Gate.KLDivergence <= 0 {
		t.Fatalf("htp gate against the baseline %+v", h.Gate)
	}
	if nll, err := pplstat.ReadNLL(filepath.Join(scores, pplstat.NLLFile)); err != nil || len(nll) != h.Gate.Scored {
		t.Fatalf("scores.nll: %d values (%v), want %d", len(nll), err, h.Gate.Scored)
	}

	var a report.AIHub
	steptest.CheckReport(t, "qnn_ai_hub.py", run(t, "qnn_ai_hub.py", "--onnx", filepath.Join(qdqDir, q.Model), "--device", "Snapdragon X Elite CRD",
		"--seq-len", "64", "--out", filepath.Join(dir, "model.bin")), &a)
	if a.JobID == "" || a.Device != "Snapdragon X Elite CRD" || a.TargetRuntime != "qnn_context_binary" {
		t.Fatalf("ai hub report %+v", a)
	}
}
