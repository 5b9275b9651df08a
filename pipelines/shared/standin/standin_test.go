package standin

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/gguf/gguftest"
	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps/steptest"
)

// The stand-ins write the reports the kinds decode strictly: the same
// types the goldens and the Python writers are checked against.
func TestStandInReportsDecodeStrictly(t *testing.T) {
	dir := t.TempDir()
	gguf := filepath.Join(dir, "m.gguf")
	if err := gguftest.Tiny().File().Write(gguf); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := standin.Tools["gguf_to_hf.py"]([]string{"--gguf", gguf, "--out", filepath.Join(dir, "ckpt")}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var g report.GGUFToHF
	steptest.CheckReport(t, "gguf_to_hf.py", bytes.TrimSpace(out.Bytes()), &g)
	if g.FileType != "Q8_0" || g.TensorTypes["Q8_0"] != 16 || g.Parameters != gguftest.Tiny().Params() || len(g.Files) != 3 {
		t.Fatalf("report %+v", g)
	}

	text := filepath.Join(dir, "eval.txt")
	os.WriteFile(text, bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 200), 0o644)
	out.Reset()
	if err := standin.Tools["hf_perplexity.py"]([]string{"--model", filepath.Join(dir, "ckpt"), "--text", text, "--ctx", "64"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var p report.Perplexity
	steptest.CheckReport(t, "hf_perplexity.py", bytes.TrimSpace(out.Bytes()), &p)
	if p.PPL <= 0 || p.Ctx != 64 {
		t.Fatalf("report %+v", p)
	}
}

// The reference stand-in reads the prompts and the checkpoint: the brief
// prompt stops at EOS, a sliding-window config adds a window sequence cut
// from the text whose decode crosses the window, and the decode stand-in
// reads what it wrote.
func TestGenerateReferenceStandIn(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	os.MkdirAll(ckpt, 0o755)
	os.WriteFile(filepath.Join(ckpt, "config.json"), []byte(`{"sliding_window": 40, "layer_types": ["sliding_attention", "full_attention"]}`), 0o644)
	os.WriteFile(filepath.Join(ckpt, "model.safetensors"), []byte("weights"), 0o644)
	text := filepath.Join(dir, "eval.txt")
	os.WriteFile(text, bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 20), 0o644)
	prompts, err := data.Materialize("chat-prompts", dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := standin.Tools["generate_reference.py"]([]string{"--model", ckpt, "--prompts", prompts, "--out", filepath.Join(dir, "ref"),
		"--max-new-tokens", "16", "--text", text}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var g report.GenerateReference
	steptest.CheckReport(t, "generate_reference.py", bytes.TrimSpace(out.Bytes()), &g)
	if g.Sequences != 5 || g.SlidingWindow == nil || *g.SlidingWindow != 40 || g.CrossesWindow == nil || !*g.CrossesWindow ||
		g.StoppedAtEOS < 1 || g.MaxNewTokens != 16 || g.ChatTemplate {
		t.Fatalf("report %+v", g)
	}
	rep, err := DecodeReport("artifact", filepath.Join(dir, "ref", "reference.json"), "runtime")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sequences != 5 || rep.Steps != g.GeneratedTokens || rep.CrossesWindow == nil || !*rep.CrossesWindow {
		t.Errorf("decode %+v", rep)
	}

	// A tokenizer with a chat template says so.
	os.WriteFile(filepath.Join(ckpt, "chat_template.jinja"), []byte("{{ messages }}"), 0o644)
	out.Reset()
	if err := standin.Tools["generate_reference.py"]([]string{"--model", ckpt, "--prompts", prompts, "--out", filepath.Join(dir, "ref3"),
		"--text", text}, &out, &out); err != nil {
		t.Fatal(err)
	}
	steptest.CheckReport(t, "generate_reference.py", bytes.TrimSpace(out.Bytes()), &g)
	if !g.ChatTemplate {
		t.Errorf("chat_template.jinja: report %+v", g)
	}

	// Without --text a sliding-window model has no window passage.
	if err := standin.Tools["generate_reference.py"]([]string{"--model", ckpt, "--prompts", prompts, "--out", filepath.Join(dir, "ref2")},
		&bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "pass --text") {
		t.Errorf("no --text: %v", err)
	}
}
