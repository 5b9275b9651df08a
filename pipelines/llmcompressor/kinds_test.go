package llmcompressor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLinearWidthsOfSmolLM2(t *testing.T) {
	// SmolLM2-135M's config.json (the fields that matter).
	p := writeConfig(t, `{"hidden_size": 576, "intermediate_size": 1536, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64}`)
	w, err := LinearWidths(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := joinInts(w, ","); got != "576,1536" {
		t.Fatalf("widths = %s, want 576,1536", got)
	}
	g, err := ChooseGroupSize(0, w)
	if err != nil || g != 64 {
		t.Fatalf("default group size = %d, %v; want 64 (576 is not a multiple of 128)", g, err)
	}
}

func TestLinearWidthsHeadDimAndTextConfig(t *testing.T) {
	// A head_dim that makes the attention output wider than hidden_size,
	// nested under text_config as multimodal configs do.
	p := writeConfig(t, `{"text_config": {"hidden_size": 2048, "intermediate_size": 6144, "num_attention_heads": 32, "head_dim": 96}}`)
	w, err := LinearWidths(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := joinInts(w, ","); got != "2048,3072,6144" {
		t.Fatalf("widths = %s", got)
	}
	if _, err := LinearWidths(writeConfig(t, `{"model_type": "x"}`)); err == nil {
		t.Fatal("a config without hidden_size was accepted")
	}
}

func TestChooseGroupSize(t *testing.T) {
	for _, tc := range []struct {
		asked  int
		widths []int
		want   int
		err    string
	}{
		{0, []int{4096, 14336}, 128, ""},
		{0, []int{576, 1536}, 64, ""},
		{0, []int{96, 160}, 32, ""},
		{32, []int{576, 1536}, 32, ""},
		{128, []int{576, 1536}, 0, "group_size 128 does not divide this model's linear layer widths (576, 1536; not a multiple of 128: 576)"},
		{128, []int{576, 1536}, 0, "use group_size 64"},
		{0, []int{100}, 0, "none of the group sizes 128, 64, 32 divides"},
		{-8, []int{576}, 0, "must be a positive number"},
	} {
		got, err := ChooseGroupSize(tc.asked, tc.widths)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ChooseGroupSize(%d, %v) error = %v, want %q", tc.asked, tc.widths, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ChooseGroupSize(%d, %v) = %d, %v; want %d", tc.asked, tc.widths, got, err, tc.want)
		}
	}
}

// writeST writes a safetensors header (no tensor bytes are needed to
// check the layout).
func writeST(t *testing.T, dir, header string) {
	t.Helper()
	b := make([]byte, 8, 8+len(header))
	n := len(header)
	for i := 0; i < 8; i++ {
		b[i] = byte(n >> (8 * i))
	}
	b = append(b, header...)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

const w4a16Config = `{"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
  "config_groups": {"group_0": {"weights": {"num_bits": 4, "strategy": "group", "group_size": 64}}}}}`

func TestCheckCompressedTensors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(w4a16Config), 0o644)
	writeST(t, dir, `{"l.weight_packed": {"dtype": "I32", "shape": [1536, 72], "data_offsets": [0, 0]},
		"l.weight_scale": {"dtype": "F32", "shape": [1536, 9], "data_offsets": [0, 0]},
		"model.embed_tokens.weight": {"dtype": "F32", "shape": [49152, 576], "data_offsets": [0, 0]}}`)
	got, err := CheckCompressedTensors(dir, 64)
	if err != nil || got.Packed != 1 || got.Format != "pack-quantized" {
		t.Fatalf("CheckCompressedTensors = %+v, %v", got, err)
	}
	// The config says 64, so a check for 32 fails.
	if _, err := CheckCompressedTensors(dir, 32); err == nil {
		t.Fatal("a group size mismatch with quantization_config passed")
	}
	// Scales that do not match one per 64 columns.
	writeST(t, dir, `{"l.weight_packed": {"dtype": "I32", "shape": [1536, 72], "data_offsets": [0, 0]},
		"l.weight_scale": {"dtype": "F32", "shape": [1536, 18], "data_offsets": [0, 0]}}`)
	if _, err := CheckCompressedTensors(dir, 64); err == nil || !strings.Contains(err.Error(), "one scale per 64") {
		t.Fatalf("wrong scale shape: %v", err)
	}
	// Mixed widths: a second 8-bit group packs 4 weights per int32.
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
  "config_groups": {"group_0": {"weights": {"num_bits": 4, "strategy": "group", "group_size": 64}},
    "group_1": {"weights": {"num_bits": 8, "strategy": "group", "group_size": 64}}}}}`), 0o644)
	mixed := `{"l.weight_packed": {"dtype": "I32", "shape": [1536, 72], "data_offsets": [0, 0]},
		"l.weight_scale": {"dtype": "F32", "shape": [1536, 9], "data_offsets": [0, 0]},
		"d.weight_packed": {"dtype": "I32", "shape": [576, 384], "data_offsets": [0, 0]},
		"d.weight_scale": {"dtype": "F32", "shape": [576, 24], "data_offsets": [0, 0]}}`
	writeST(t, dir, mixed)
	if got, err := CheckCompressedTensors(dir, 64); err != nil || got.Packed != 2 || got.EightBit != 1 {
		t.Fatalf("mixed 4/8-bit: CheckCompressedTensors = %+v, %v", got, err)
	}
	// An 8-bit tensor when the config has only a 4-bit group.
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(w4a16Config), 0o644)
	if _, err := CheckCompressedTensors(dir, 64); err == nil || !strings.Contains(err.Error(), "at 4 bits") {
		t.Fatalf("an 8-bit tensor without an 8-bit group: %v", err)
	}
	// No packed weights at all: an unquantized checkpoint.
	writeST(t, dir, `{"l.weight": {"dtype": "F32", "shape": [1536, 576], "data_offsets": [0, 0]}}`)
	if _, err := CheckCompressedTensors(dir, 64); err == nil {
		t.Fatal("a checkpoint without packed weights passed")
	}
	// No quantization_config.
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"hidden_size": 576}`), 0o644)
	if _, err := CheckCompressedTensors(dir, 64); err == nil {
		t.Fatal("a config without quantization_config passed")
	}
}
