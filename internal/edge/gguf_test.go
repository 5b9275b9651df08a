package edge

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/gguf/gguftest"
)

// TestResolveGGUF: a local GGUF's shape comes from its header: the KV
// cache's dimensions from the metadata, the parameter count from the
// tensors, as for the same model's checkpoint; and what it was quantized
// to is kept, with a note.
func TestResolveGGUF(t *testing.T) {
	dir := t.TempDir()
	m := gguftest.Llama3_8B()
	if err := m.File().Write(filepath.Join(dir, "llama3.gguf")); err != nil {
		t.Fatal(err)
	}
	got := ResolveModel("llama3.gguf", dir)
	if len(got.Problems) > 0 {
		t.Fatalf("problems: %q", got.Problems)
	}
	if want := (catalog.ModelShape{Layers: 32, KVHeads: 8, HeadDim: 128, Params: llama3Params}); got.Shape != want {
		t.Errorf("shape %+v, want %+v", got.Shape, want)
	}
	if got.MaxContext != 8192 || got.From != "the GGUF header of llama3.gguf" {
		t.Errorf("max context %d, from %q", got.MaxContext, got.From)
	}
	if got.GGUF == nil || got.GGUF.FileType != "Q4_K_M" || got.GGUF.Architecture != "llama" || got.GGUF.TensorTypes["Q4_K"] != 226 || !got.GGUF.Quantized() {
		t.Errorf("GGUF %+v", got.GGUF)
	}
	if !strings.Contains(strings.Join(got.Notes, "\n"), "llama3.gguf is already quantized (Q4_K_M)") {
		t.Errorf("notes %q", got.Notes)
	}

	// A folder holding one GGUF (and no config.json) is that GGUF.
	sub := filepath.Join(dir, "ggufdir")
	m = gguftest.Tiny()
	m.WeightType, m.FileType = "F16", "F16"
	m.Extra = []gguftest.KV{{Key: "llama.attention.head_count_kv", Value: []uint32{1, 2}}, {Key: "llama.attention.key_length", Value: uint32(32)}}
	writeGGUF(t, filepath.Join(sub, "m.gguf"), m)
	got = ResolveModel("./ggufdir", dir)
	if want := (catalog.ModelShape{Layers: 2, KVHeads: 2, HeadDim: 32, Params: m.Params()}); got.Shape != want || len(got.Problems) > 0 {
		t.Errorf("folder: shape %+v (want %+v), problems %q", got.Shape, want, got.Problems)
	}
	if got.GGUF.Quantized() || strings.Contains(strings.Join(got.Notes, "\n"), "already quantized") {
		t.Errorf("an F16 GGUF is quantized? %+v %q", got.GGUF, got.Notes)
	}

	// Metadata without the head counts: the shape is unknown, with a note,
	// and the parameters are still counted.
	m = gguftest.Tiny()
	m.Extra = []gguftest.KV{{Key: "llama.attention.head_count", Value: "four"}}
	writeGGUF(t, filepath.Join(dir, "nohead.gguf"), m)
	got = ResolveModel("nohead.gguf", dir)
	if got.HasKVShape() || got.Shape.Params != m.Params() || !strings.Contains(strings.Join(got.Notes, "\n"), "lacks head_dim") {
		t.Errorf("no head count: %+v, notes %q", got.Shape, got.Notes)
	}
}

// TestResolveGGUFProblems: a GGUF no run could convert is a Problem.
func TestResolveGGUFProblems(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "page.gguf"), "<html>404</html>")
	cut := gguftest.Tiny()
	cut.Cut = -1
	writeGGUF(t, filepath.Join(dir, "cut.gguf"), cut)
	noArch := gguftest.Tiny()
	noArch.Extra = []gguftest.KV{{Key: "general.architecture", Value: uint8(1)}}
	writeGGUF(t, filepath.Join(dir, "noarch.gguf"), noArch)
	writeGGUF(t, filepath.Join(dir, "vocab.gguf"), gguftest.Model{Vocab: 4})
	for src, want := range map[string]string{
		"page.gguf":   "page.gguf is not a usable GGUF file: it does not start with the GGUF magic: it looks like an HTML",
		"cut.gguf":    "ends past the end of the file",
		"noarch.gguf": "noarch.gguf has no general.architecture",
		"vocab.gguf":  "vocab.gguf holds no tensors",
	} {
		m := ResolveModel(src, dir)
		if !strings.Contains(strings.Join(m.Problems, "\n"), want) {
			t.Errorf("%s: problems %q, want %q", src, m.Problems, want)
		}
	}
	if m := ResolveModel("missing.gguf", dir); len(m.Problems) > 0 || len(m.Notes) == 0 {
		t.Errorf("a missing GGUF: problems %q, notes %q", m.Problems, m.Notes)
	}
}

func writeGGUF(t *testing.T, path string, m gguftest.Model) {
	t.Helper()
	writeFile(t, path, "")
	f := m.File()
	if m.Layers == 0 {
		f.Tensors = nil
	}
	if err := f.Write(path); err != nil {
		t.Fatal(err)
	}
}

// A GGUF source's architecture is what transformers' GGUF loader makes of
// its general.architecture; one it cannot read, or a mixture of experts it
// would load as a dense model, is a Problem at the source.
func TestResolveGGUFArchitecture(t *testing.T) {
	dir := t.TempDir()
	for name, arch := range map[string]string{"qwen.gguf": "qwen2", "qmoe.gguf": "qwen3moe", "gemma.gguf": "gemma3", "rwkv.gguf": "rwkv6"} {
		m := gguftest.Tiny()
		m.Arch = arch
		writeGGUF(t, filepath.Join(dir, name), m)
	}
	mixtral := gguftest.Tiny()
	mixtral.Extra = []gguftest.KV{{Key: "llama.expert_count", Value: uint32(8)}}
	writeGGUF(t, filepath.Join(dir, "mixtral.gguf"), mixtral)

	for src, want := range map[string]string{"qwen.gguf": "qwen2", "qmoe.gguf": "qwen3_moe", "gemma.gguf": "gemma3_text"} {
		if m := ResolveModel(src, dir); m.Architecture != want || len(m.Problems) > 0 {
			t.Errorf("%s: architecture %q (want %q), problems %q", src, m.Architecture, want, m.Problems)
		}
	}
	for src, want := range map[string]string{
		"rwkv.gguf":    "rwkv.gguf is a rwkv6 GGUF (general.architecture), which the GGUF loader of transformers 4.57.6",
		"mixtral.gguf": "mixtral.gguf is a mixture of experts (llama.expert_count 8)",
	} {
		m := ResolveModel(src, dir)
		if !strings.Contains(strings.Join(m.Problems, "\n"), want) || m.Architecture != "" {
			t.Errorf("%s: problems %q, want %q", src, m.Problems, want)
		}
	}
}
