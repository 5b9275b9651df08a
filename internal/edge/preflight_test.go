package edge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/recipe"
)

const llama3ConfigJSON = `{"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
 "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": false}`

// preflightRecipe writes a model folder with config and a recipe beside it,
// and returns the parsed recipe.
func preflightRecipe(t *testing.T, config, targets string) *recipe.Recipe {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "model"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model", "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "phone.yaml")
	r, err := recipe.Parse(path, []byte("edgepipe: 1\nname: phone\nmodel:\n  source: ./model\ntargets:\n"+targets))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The domain brief: an 8 GB phone, a 4 GB model and a 32K context run out
// of memory; the same model at 4K fits.
func TestPreflightRefusesTheLongContextTrap(t *testing.T) {
	p := preflightRecipe(t, llama3ConfigJSON, `
  at-32k:
    device: apple-a18
    format: gguf-q4_0
    context: 32768
  at-4k:
    device: apple-a18
    format: gguf-q4_0
    context: 4096
`)
	diags, fits := Preflight(p)
	if len(diags) != 1 {
		t.Fatalf("diagnostics: %v", diags)
	}
	d := diags[0]
	if d.Pos.Line != 7 || d.Pos.Col != 3 || !strings.HasSuffix(d.Pos.File, "phone.yaml") {
		t.Errorf("at %v, want the target's key at 7:3", d.Pos)
	}
	if !strings.HasPrefix(d.Msg, `target "at-32k": does not fit in memory on apple-a18: it needs 9.49 GB`) ||
		!strings.HasPrefix(d.Hint, "fixes: context: 4096 (KV cache 0.54 GB, total 5.73 GB") ||
		!strings.Contains(d.Hint, "kv_dtype: q4 with context: 16384") || !strings.Contains(d.Hint, "a smaller model (at most 2.30B parameters") {
		t.Errorf("diagnostic:\n%s", d)
	}
	if len(fits) != 2 || fits[0].Target != "at-32k" || fits[1].Target != "at-4k" {
		t.Fatalf("fits %+v", fits)
	}
	ok := fits[1]
	if ok.Memory == nil || !ok.Memory.OK() || len(ok.Problems) != 0 || ok.ContextAssumed {
		t.Errorf("4K: %+v", ok.Prediction)
	}
	if mf := ok.ManifestMemoryFit(); mf == nil || !mf.Fits || mf.Context != 4096 || mf.KVCacheBytes != 1<<29 {
		t.Errorf("4K manifest record %+v", mf)
	}
}

func TestPreflightBudgets(t *testing.T) {
	p := preflightRecipe(t, llama3ConfigJSON, `
  fast:
    device: apple-a18
    format: gguf-q4_0
    min_tokens_per_s: 20
  small:
    device: apple-a18
    format: gguf-q4_0
    context: 4096
    max_memory_gb: 4
    max_first_token_ms: 500
`)
	diags, fits := Preflight(p)
	if len(diags) != 2 || !strings.Contains(diags[0].Msg, `target "fast": min_tokens_per_s 20 is out of reach`) ||
		!strings.Contains(diags[1].Msg, `target "small": needs 5.73 GB of memory on apple-a18, over its max_memory_gb of 4`) {
		t.Fatalf("diagnostics:\n%v", diags)
	}
	// fast sets no context: the pre-flight says what it assumed.
	if !fits[0].ContextAssumed || !strings.Contains(strings.Join(fits[0].Notes, "\n"), "sized for 4096 tokens") {
		t.Errorf("fast: %+v", fits[0].Prediction)
	}
	b := fits[1].ManifestBudgets()
	if b == nil || b.MaxMemoryGB == nil || b.MaxMemoryGB.Limit != 4 || b.MaxFirstTokenMS == nil || b.MaxFirstTokenMS.Predicted != nil {
		t.Errorf("small budgets %+v", b)
	}
}

// What plan time cannot know is a note, never an error: a stand-in model
// without a shape, or a source that is downloaded at run time.
func TestPreflightSkipsUnknownShapes(t *testing.T) {
	p := preflightRecipe(t, `{"hidden_size": 512}`, "  q4: {device: apple-a18, format: gguf-q4_0, context: 131072, max_memory_gb: 0.5}\n")
	diags, fits := Preflight(p)
	if len(diags) != 0 || fits[0].Memory != nil || len(fits[0].Notes) == 0 {
		t.Errorf("stand-in model: %v %+v", diags, fits)
	}

	t.Setenv("HF_HUB_CACHE", t.TempDir())
	r, err := recipe.Parse("hf.yaml", []byte("edgepipe: 1\nname: hf\nmodel: {source: hf://meta-llama/Meta-Llama-3-8B}\ntargets:\n  x: {device: apple-a18, format: gguf-q4_0, context: 131072}\n"))
	if err != nil {
		t.Fatal(err)
	}
	diags, fits = Preflight(r)
	if len(diags) != 0 || !strings.Contains(strings.Join(fits[0].Notes, "\n"), "not in the local Hugging Face cache") {
		t.Errorf("hf source: %v %+v", diags, fits[0].Notes)
	}
}
