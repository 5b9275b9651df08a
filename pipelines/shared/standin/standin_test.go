package standin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// tiny_model.py's stand-in writes its report strictly, and a checkpoint
// whose weights follow its inputs: the same inputs the same bytes,
// another architecture or text other bytes; it refuses an architecture
// tiny_model.py does not build and a folder without a tokenizer.
func TestTinyModelStandIn(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	os.MkdirAll(tok, 0o755)
	os.WriteFile(filepath.Join(tok, "tokenizer.json"), []byte(`{"model": {}}`), 0o644)
	os.WriteFile(filepath.Join(tok, "model.safetensors"), []byte("the tokenizer model's weights"), 0o644)
	text := filepath.Join(dir, "text.txt")
	os.WriteFile(text, []byte("the quick brown fox jumps over the lazy dog"), 0o644)
	build := func(arch, out string) report.TinyModel {
		t.Helper()
		var stdout bytes.Buffer
		if err := standin.Tools["tiny_model.py"]([]string{"--arch", arch, "--tokenizer", tok, "--text", text, "--out", out}, &stdout, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		var r report.TinyModel
		steptest.CheckReport(t, "tiny_model.py", bytes.TrimSpace(stdout.Bytes()), &r)
		return r
	}
	a := build("qwen3", filepath.Join(dir, "a"))
	if a.Architecture != "Qwen3ForCausalLM" || a.TextTokens != 9 || a.Parameters != 128 ||
		strings.Join(a.Files, " ") != "config.json model.safetensors tokenizer.json" {
		t.Fatalf("report %+v", a)
	}
	st, err := os.ReadFile(filepath.Join(dir, "a", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(st); hex.EncodeToString(sum[:]) != a.SHA256 || int64(len(st)) != a.Bytes {
		t.Errorf("the report's digest %s is not the file's", a.SHA256)
	}
	if again := build("qwen3", filepath.Join(dir, "b")); again.SHA256 != a.SHA256 {
		t.Error("the same inputs made other weights")
	}
	if other := build("gemma3", filepath.Join(dir, "c")); other.SHA256 == a.SHA256 || other.Architecture != "Gemma3ForCausalLM" {
		t.Errorf("another architecture made the same weights: %+v", other)
	}
	os.WriteFile(text, []byte("another text"), 0o644)
	if other := build("qwen3", filepath.Join(dir, "d")); other.SHA256 == a.SHA256 {
		t.Error("another text made the same weights")
	}
	err = standin.Tools["tiny_model.py"]([]string{"--arch", "gpt2", "--tokenizer", tok, "--text", text, "--out", filepath.Join(dir, "e")}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `invalid choice: "gpt2"`) {
		t.Errorf("unknown architecture: %v", err)
	}
	os.Remove(filepath.Join(tok, "tokenizer.json"))
	err = standin.Tools["tiny_model.py"]([]string{"--arch", "llama", "--tokenizer", tok, "--text", text, "--out", filepath.Join(dir, "f")}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "has no tokenizer.json or tokenizer.model") {
		t.Errorf("no tokenizer: %v", err)
	}
}
