package recipewrite

import (
	"reflect"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/recipe"
)

// What Write renders parses back to the same recipe.
func TestWriteRoundTrips(t *testing.T) {
	r := &recipe.Recipe{Edgepipe: 1, Name: "phone", Description: "yes: a colon, and # a hash",
		Model: recipe.Model{Source: "../models/llama 3", AllowPickle: true},
		Data:  recipe.Data{Calibration: "calib.txt", Eval: recipe.DefaultEval, AllowOverlap: true},
		Quality: recipe.Quality{Perplexity: recipe.PerplexityGate{Context: 256, WarnDelta: 0.25, MaxDelta: 1.5, MaxChunks: 4},
			Generation: &recipe.GenerationGate{MinTokenAgreement: 0.75, MaxMeanKL: recipe.DefaultMaxMeanKL, MaxNewTokens: 32}},
		Targets: []recipe.Target{
			{Name: "a", Device: "x86-laptop", Format: "gguf-q4_k_m", Context: 4096, KVDtype: "q8",
				Quality: recipe.Quality{Perplexity: recipe.PerplexityGate{Context: 256, WarnDelta: 0.25, MaxDelta: 0.2, MaxChunks: 4},
					Generation: &recipe.GenerationGate{MinTokenAgreement: 0.75, MaxMeanKL: 0.3, MaxNewTokens: 16}},
				With:          map[string]any{"imatrix": true, "mode": "no", "n": 3},
				MinTokensPerS: 20, MaxMemoryGB: 1.5},
			{Name: "b", Device: "x86-laptop", Format: "gguf-q8_0", KVDtype: "f16",
				Quality: recipe.Quality{Perplexity: recipe.PerplexityGate{Context: 256, WarnDelta: 0.25, MaxDelta: 1.5, MaxChunks: 4},
					Generation: &recipe.GenerationGate{MinTokenAgreement: 0.75, MaxMeanKL: recipe.DefaultMaxMeanKL, MaxNewTokens: 32}}},
		}}
	out := Write(r, []string{"yaml-language-server: $schema=x.json", "", "two lines"})
	if !strings.HasPrefix(string(out), "# yaml-language-server: $schema=x.json\n#\n# two lines\nedgepipe: 1\n") {
		t.Errorf("header:\n%s", out)
	}
	got, err := recipe.Parse("r.yaml", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Name != r.Name || got.Description != r.Description || got.Model.Source != r.Model.Source || !got.Model.AllowPickle ||
		got.Data != (recipe.Data{Calibration: "calib.txt", Eval: recipe.DefaultEval, AllowOverlap: true, Pos: got.Data.Pos}) ||
		got.Quality.Perplexity != r.Quality.Perplexity || *got.Quality.Generation != *r.Quality.Generation {
		t.Errorf("recipe fields differ:\n%s", out)
	}
	for i, tg := range got.Targets {
		want := r.Targets[i]
		if tg.Name != want.Name || tg.Device != want.Device || tg.Format != want.Format || tg.Context != want.Context ||
			tg.KVDtype != want.KVDtype || tg.Quality.Perplexity.MaxDelta != want.Quality.Perplexity.MaxDelta ||
			*tg.Quality.Generation != *want.Quality.Generation ||
			tg.MinTokensPerS != want.MinTokensPerS || tg.MaxMemoryGB != want.MaxMemoryGB || !reflect.DeepEqual(tg.With, want.With) {
			t.Errorf("target %s differs: %+v\n%s", want.Name, tg, out)
		}
	}
}
