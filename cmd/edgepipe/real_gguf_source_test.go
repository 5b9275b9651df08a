package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// TestRealGGUFSource runs a recipe whose model.source is a GGUF file (the
// built-in SmolLM2's own Q4_1 GGUF, copied next to the recipe): the source
// step dequantizes it with the real gguf_to_hf.py into the checkpoint the
// GGUF pipeline converts, gated and published like any source. The
// manifest says the source was a Q4_1 GGUF. Measured: 274 s for the source
// step and 545 s in all on a loaded 2-core machine (load average 15).
func TestRealGGUFSource(t *testing.T) {
	t.Parallel() // two real tests at a time share the cores (docs/testing.md)
	run, work := realEdgepipe(t, "edgepipe toolchain install llama llamacpp builtin:smollm2-135m")
	cache := userCache(t)
	run("toolchain", "install", "builtin:smollm2-135m")
	src, err := toolchain.BuiltinGGUF(cache, "smollm2-135m")
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, src, filepath.Join(work, "SmolLM2-135M-Instruct.Q4_1.gguf"))
	recipe := `edgepipe: 1
name: from-gguf
model: {source: ./SmolLM2-135M-Instruct.Q4_1.gguf}
data: {eval: builtin:eval}
quality: {perplexity: {context: 128, max_chunks: 2}}
targets:
  q8: {device: x86-laptop, format: gguf-q8_0}
`
	if err := os.WriteFile(filepath.Join(work, "from-gguf.yaml"), []byte(recipe), 0o644); err != nil {
		t.Fatal(err)
	}
	out := string(run("run", "from-gguf.yaml"))
	t.Log(out)
	art := filepath.Join(work, "artifacts", "from-gguf", "q8")
	run("verify", art)
	m, err := manifest.Read(art)
	if err != nil {
		t.Fatal(err)
	}
	// Published under the source file's name, its quantization dropped.
	if m.Target.Artifact != "SmolLM2-135M-Instruct-q8_0.gguf" {
		t.Errorf("target.artifact %q, want SmolLM2-135M-Instruct-q8_0.gguf", m.Target.Artifact)
	}
	if q := m.Source.Quantized; q == nil || q.Format != "gguf" || q.Type != "Q4_1" {
		t.Errorf("source.quantized %+v, want a Q4_1 GGUF", q)
	}
	var names []string
	for _, f := range m.Source.Files {
		names = append(names, f.Path)
	}
	if !strings.Contains(strings.Join(names, " "), "model.safetensors") {
		t.Errorf("source files %v: want the dequantized checkpoint", names)
	}
	for _, s := range m.Steps {
		if s.StandIn {
			t.Errorf("step %s ran a stand-in", s.ID)
		}
	}
	if p := m.Metrics.Perplexity; p == nil || p.Verdict == manifest.VerdictFail {
		t.Errorf("perplexity %+v", p)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
