package edge

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/catalog"
)

// hfConfig is the part of a Hugging Face config.json the pre-flight reads.
// Pointers tell "absent" from zero.
type hfConfig struct {
	// ModelType is the architecture transformers and the converters
	// dispatch on (llama, qwen2, gemma3_text, ...).
	ModelType     string `json:"model_type"`
	Layers        *int   `json:"num_hidden_layers"`
	Heads         *int   `json:"num_attention_heads"`
	KVHeads       *int   `json:"num_key_value_heads"`
	Hidden        *int   `json:"hidden_size"`
	HeadDim       *int   `json:"head_dim"`
	Intermediate  *int   `json:"intermediate_size"`
	Vocab         *int   `json:"vocab_size"`
	TieEmbeddings *bool  `json:"tie_word_embeddings"`
	LocalExperts  *int   `json:"num_local_experts"`
	// MaxPositions is the longest context the model was trained for.
	MaxPositions *int      `json:"max_position_embeddings"`
	TextConfig   *hfConfig `json:"text_config"`
}

func readHFConfig(path string) (hfConfig, error) {
	b, err := boundedfile.Read(path, boundedfile.ModelJSONLimit)
	if err != nil {
		if os.IsNotExist(err) {
			return hfConfig{}, fmt.Errorf("no config.json, so the model's shape is unknown")
		}
		return hfConfig{}, fmt.Errorf("read config.json: %w", err)
	}
	var c hfConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return hfConfig{}, fmt.Errorf("config.json is not valid JSON: %w", err)
	}
	// Multimodal checkpoints keep the language model's numbers in
	// text_config; its KV cache is the one that grows with the context.
	if c.Layers == nil && c.TextConfig != nil {
		// The converters dispatch on the checkpoint's own model_type
		// (gemma3, not its text_config's gemma3_text).
		t := *c.TextConfig
		if c.ModelType != "" {
			t.ModelType = c.ModelType
		}
		return t, nil
	}
	return c, nil
}

func val(p *int) int {
	if p == nil || *p < 0 {
		return 0
	}
	return *p
}

// shape returns the KV-cache dimensions; the parameter count is left to
// the caller, which prefers the weights' own headers.
func (c hfConfig) shape() catalog.ModelShape {
	kvHeads := val(c.KVHeads)
	if kvHeads == 0 {
		// Without grouped-query attention every head keeps its own K and V
		// (transformers' default for num_key_value_heads).
		kvHeads = val(c.Heads)
	}
	return catalog.ModelShape{Layers: val(c.Layers), KVHeads: kvHeads, HeadDim: c.headDim()}
}

func (c hfConfig) headDim() int {
	if d := val(c.HeadDim); d > 0 {
		return d
	}
	if h, n := val(c.Hidden), val(c.Heads); h > 0 && n > 0 && h%n == 0 {
		return h / n
	}
	return 0
}

func (c hfConfig) missingKVFields() []string {
	var out []string
	if val(c.Layers) == 0 {
		out = append(out, "num_hidden_layers")
	}
	if val(c.KVHeads) == 0 && val(c.Heads) == 0 {
		out = append(out, "num_key_value_heads (or num_attention_heads)")
	}
	if c.headDim() == 0 {
		out = append(out, "head_dim (or hidden_size and num_attention_heads)")
	}
	return out
}

// estimateParams counts a Llama-style decoder's weights from its
// dimensions: embeddings (and an untied output head), per layer the q, k, v
// and o projections, a gated MLP (gate, up, down) per expert and two norms,
// and the final norm. Biases are left out (under 0.1% where they exist).
// It returns 0 when a dimension it needs is missing.
func (c hfConfig) estimateParams() int64 {
	layers, hidden, heads := int64(val(c.Layers)), int64(val(c.Hidden)), int64(val(c.Heads))
	inter, vocab, hd := int64(val(c.Intermediate)), int64(val(c.Vocab)), int64(c.headDim())
	kv := int64(c.shape().KVHeads)
	if layers == 0 || hidden == 0 || heads == 0 || inter == 0 || vocab == 0 || hd == 0 {
		return 0
	}
	embed := vocab * hidden
	if c.TieEmbeddings == nil || !*c.TieEmbeddings {
		// LlamaConfig's default is an untied output head.
		embed *= 2
	}
	experts := int64(1)
	if e := val(c.LocalExperts); e > 1 {
		experts = int64(e)
	}
	attn := hidden*heads*hd*2 + hidden*kv*hd*2
	mlp := 3 * hidden * inter * experts
	if experts > 1 {
		mlp += hidden * experts // router
	}
	return embed + layers*(attn+mlp+2*hidden) + hidden
}
