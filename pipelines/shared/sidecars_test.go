package shared

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCopyTokenizerFiles(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	for _, n := range []string{"tokenizer.json", "generation_config.json", "model.safetensors", "chat_template.jinja"} {
		os.WriteFile(filepath.Join(from, n), []byte(n), 0o644)
	}
	got, err := CopyTokenizerFiles(from, to)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tokenizer.json", "generation_config.json", "chat_template.jinja"}; !slices.Equal(got, want) {
		t.Fatalf("copied %v, want %v (never the weights)", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(to, "tokenizer.json")); string(b) != "tokenizer.json" {
		t.Fatalf("copy holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(to, "model.safetensors")); err == nil {
		t.Fatal("the weights were copied")
	}
	os.Remove(filepath.Join(from, "config.json"))
	os.Symlink("/etc/passwd", filepath.Join(from, "config.json"))
	if _, err := CopyTokenizerFiles(from, t.TempDir()); err == nil {
		t.Fatal("a link in the checkpoint was followed")
	}
}
