package shared

import (
	_ "embed"
	"slices"
	"strings"
)

// The pinned transformers' registries, as lists plan time reads without
// Python; python/tests/test_architectures.py keeps them equal to the
// toolchain's.
var (
	//go:embed causal_lm_architectures.txt
	causalLMList string
	//go:embed gguf_architectures.txt
	ggufList string
)

// ArchitectureList parses a registry list: one entry a line, its fields
// split on spaces, "#" lines and blank lines skipped.
func ArchitectureList(text string) [][]string {
	var out [][]string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, strings.Fields(l))
		}
	}
	return out
}

// ArchitectureNames is the first field of each entry of a registry list.
func ArchitectureNames(text string) []string {
	var out []string
	for _, f := range ArchitectureList(text) {
		out = append(out, f[0])
	}
	return out
}

// TransformersVersion is the transformers the lists were taken from (the
// llama toolchain's).
const TransformersVersion = "4.57.6"

// CausalLM reports whether the pinned transformers loads a model_type as
// a causal language model, which every pipeline's baseline does.
func CausalLM(modelType string) bool {
	return slices.Contains(ArchitectureNames(causalLMList), modelType)
}

// GGUFModelType is the model_type the pinned transformers' GGUF loader
// (gguf_to_hf.py's) makes of a GGUF's general.architecture; false when it
// cannot read that architecture.
func GGUFModelType(arch string) (string, bool) {
	for _, f := range ArchitectureList(ggufList) {
		if f[0] == arch && len(f) == 2 {
			return f[1], true
		}
	}
	return "", false
}
