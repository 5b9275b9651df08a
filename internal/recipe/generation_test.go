package recipe

import (
	"strings"
	"testing"
)

// The generation gate: a text-generation recipe gets the defaults, the
// recipe's section is every target's starting point, and a target's own
// changes only that target.
func TestGenerationGate(t *testing.T) {
	const head = "edgepipe: 1\nname: t\nmodel: {source: builtin:smollm2-135m}\n"
	def := *DefaultGeneration()
	for _, tc := range []struct {
		name, body string
		recipe     GenerationGate
		targets    []GenerationGate
	}{
		{"default", "targets:\n  a: {device: x86-laptop, format: gguf-q8_0}\n", def, []GenerationGate{def}},
		{"recipe", "quality: {generation: {min_token_agreement: 0.8, max_mean_kl: 0.25, max_new_tokens: 32}}\n" +
			"targets:\n  a: {device: x86-laptop, format: gguf-q8_0}\n",
			GenerationGate{0.8, 0.25, 32}, []GenerationGate{{0.8, 0.25, 32}}},
		{"target", "quality: {generation: {max_mean_kl: 0.5}}\ntargets:\n" +
			"  a: {device: x86-laptop, format: gguf-q8_0, quality: {generation: {min_token_agreement: 0.9}}}\n" +
			"  b: {device: x86-laptop, format: gguf-q4_k_m}\n",
			GenerationGate{DefaultMinTokenAgreement, 0.5, DefaultMaxNewTokens},
			[]GenerationGate{{0.9, 0.5, DefaultMaxNewTokens}, {DefaultMinTokenAgreement, 0.5, DefaultMaxNewTokens}}},
		{"empty section", "quality: {generation: }\ntargets:\n  a: {device: x86-laptop, format: gguf-q8_0}\n", def, []GenerationGate{def}},
	} {
		r, err := Parse("r.yaml", []byte(head+tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Quality.Generation == nil || *r.Quality.Generation != tc.recipe {
			t.Errorf("%s: recipe gate %+v, want %+v", tc.name, r.Quality.Generation, tc.recipe)
		}
		for i, tg := range r.Targets {
			if tg.Quality.Generation == nil || *tg.Quality.Generation != tc.targets[i] {
				t.Errorf("%s: target %s gate %+v, want %+v", tc.name, tg.Name, tg.Quality.Generation, tc.targets[i])
			}
		}
	}
}

// Bad bounds are refused where they are written, with the fix; an image
// classifier generates no text, so the key is refused there.
func TestGenerationGateRefusals(t *testing.T) {
	const head = "edgepipe: 1\nname: t\nmodel: {source: builtin:smollm2-135m}\n"
	for _, tc := range []struct{ body, want string }{
		{"quality:\n  generation: {min_token_agreement: 1.5}\ntargets:\n  a: {device: x86-laptop, format: gguf-q8_0}\n",
			"r.yaml:5:37: quality.generation.min_token_agreement 1.5 is over 1\n  hint: write the agreement as a fraction of the decoded tokens"},
		{"quality:\n  generation: {max_mean_kl: -0.1}\ntargets:\n  a: {device: x86-laptop, format: gguf-q8_0}\n",
			"r.yaml:5:29: quality.generation.max_mean_kl must not be negative, got -0.1"},
		{"targets:\n  a:\n    device: x86-laptop\n    format: gguf-q8_0\n    quality: {generation: {max_new_tokens: 0}}\n",
			"r.yaml:8:44: targets.a.quality.generation.max_new_tokens must be greater than 0, got 0"},
		{"targets:\n  a:\n    device: x86-laptop\n    format: gguf-q8_0\n    quality: {generation: {max_new_tokens: 5000}}\n",
			"r.yaml:8:44: targets.a.quality.generation.max_new_tokens 5000 is over 1024\n  hint: use 1024 or fewer"},
		{"quality:\n  generation: {min_agreement: 0.9}\ntargets:\n  a: {device: x86-laptop, format: gguf-q8_0}\n",
			"r.yaml:5:16: unknown key \"min_agreement\" in quality.generation\n  hint: valid keys here: min_token_agreement, max_mean_kl, max_new_tokens"},
		{"task: image-classification\nquality:\n  generation: {min_token_agreement: 0.9}\ntargets:\n  a: {device: x86-laptop, format: onnx-int8}\n",
			"r.yaml:6:3: quality.generation applies only to text-generation recipes, and this one has task: image-classification\n  hint: remove it: an image classifier generates no text"},
	} {
		_, err := Parse("r.yaml", []byte(head+tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant %s", tc.body, err, tc.want)
		}
	}
}

// An image-classification recipe has no generation gate at all, so its
// plan and manifest carry none.
func TestImageClassifierHasNoGenerationGate(t *testing.T) {
	r, err := Parse("r.yaml", []byte("edgepipe: 1\nname: t\ntask: image-classification\nmodel: {source: builtin:efficientnet-lite0}\n"+
		"targets:\n  a: {device: x86-laptop, format: onnx-int8}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Quality.Generation != nil || r.Targets[0].Quality.Generation != nil {
		t.Errorf("generation gates %+v, %+v, want none", r.Quality.Generation, r.Targets[0].Quality.Generation)
	}
}
