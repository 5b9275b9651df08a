package edge

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Llama-3-8B's numbers: config.json and the parameter count its
// safetensors hold.
const (
	llama3Config = `{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16"}`
	llama3Params = 8030261248
)

type tensor struct {
	Dtype       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// llama3Tensors is Llama-3-8B's tensor list, layers [from, to).
func llama3Tensors(from, to int, withEmbeddings bool) map[string]tensor {
	ts := map[string]tensor{}
	add := func(name string, shape ...int64) { ts[name] = tensor{Dtype: "BF16", Shape: shape} }
	if withEmbeddings {
		add("model.embed_tokens.weight", 128256, 4096)
		add("lm_head.weight", 128256, 4096)
		add("model.norm.weight", 4096)
	}
	for l := from; l < to; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"self_attn.q_proj.weight", 4096, 4096)
		add(p+"self_attn.k_proj.weight", 1024, 4096)
		add(p+"self_attn.v_proj.weight", 1024, 4096)
		add(p+"self_attn.o_proj.weight", 4096, 4096)
		add(p+"mlp.gate_proj.weight", 14336, 4096)
		add(p+"mlp.up_proj.weight", 14336, 4096)
		add(p+"mlp.down_proj.weight", 4096, 14336)
		add(p+"input_layernorm.weight", 4096)
		add(p+"post_attention_layernorm.weight", 4096)
	}
	return ts
}

// writeSafetensorsHeader writes only the header of a safetensors file: the
// pre-flight reads no further, so the multi-GB data section is left out.
func writeSafetensorsHeader(t *testing.T, path string, tensors any) {
	t.Helper()
	hdr, err := json.Marshal(tensors)
	if err != nil {
		t.Fatal(err)
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	if err := os.WriteFile(path, append(b, hdr...), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
