package shared

import (
	_ "embed"
	"strings"
)

// Registry is a registry list plan time reads without Python: an entry a
// line (its fields split on spaces), "#" lines and blank lines skipped, and
// the "# pinned: NAME VERSION, ..." line naming the packages it was taken
// from, which the list's Python test checks are the toolchain's.
type Registry struct {
	Entries map[string][]string // first field -> the entry's other fields
	Pinned  string              // "optimum-onnx 0.1.0, transformers 4.57.6"
}

// ParseRegistry reads a registry list.
func ParseRegistry(text string) Registry {
	r := Registry{Entries: map[string][]string{}}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "# pinned: "):
			r.Pinned = strings.TrimPrefix(l, "# pinned: ")
		case l != "" && !strings.HasPrefix(l, "#"):
			f := strings.Fields(l)
			r.Entries[f[0]] = f[1:]
		}
	}
	return r
}

// Has reports whether the list names a model type.
func (r Registry) Has(name string) bool {
	_, ok := r.Entries[name]
	return ok
}

// The pinned transformers' registries (the llama toolchain's):
// python/tests/test_architectures.py keeps them equal to the toolchain's.
var (
	//go:embed causal_lm_architectures.txt
	causalLMList string
	//go:embed gguf_architectures.txt
	ggufList string

	causalLM     = ParseRegistry(causalLMList)
	ggufLoadable = ParseRegistry(ggufList)
)

// TransformersPinned is the transformers the lists were taken from.
func TransformersPinned() string { return causalLM.Pinned }

// CausalLM reports whether the pinned transformers loads a model_type as
// a causal language model, which every pipeline's baseline does.
func CausalLM(modelType string) bool { return causalLM.Has(modelType) }

// GGUFModelType is the model_type the pinned transformers' GGUF loader
// (gguf_to_hf.py's) makes of a GGUF's general.architecture; false when it
// cannot read that architecture.
func GGUFModelType(arch string) (string, bool) {
	f, ok := ggufLoadable.Entries[arch]
	if !ok || len(f) != 1 {
		return "", false
	}
	return f[0], true
}
