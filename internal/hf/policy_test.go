package hf

import (
	"encoding/json"
	"testing"
)

// Python's json is the reader that matters (transformers), so auto_map is
// found however a config hides it from a strict reader.
func TestDeclaresAutoMap(t *testing.T) {
	for cfg, want := range map[string]bool{
		`{"model_type": "llama"}`:                                            false,
		`{"auto_map": {"AutoModel": "modeling.M"}}`:                          true,
		`{"auto_map": "modeling.M"}`:                                         true,
		`{"auto_map": ["a", "b"]}`:                                           true,
		`{"auto\u005fmap": {"AutoModel": "m.M"}}`:                            true,
		`{"rope_scaling": NaN, "auto_map": {"AutoModel": "m.M"}}`:            true,
		`{"x": -Infinity, "model_type": "llama"}`:                            false,
		`{"note": "NaN \"auto_map\" is a word here", "model_type": "llama"}`: false,
		`{"auto_map": {"AutoModel": "m.M"}, oops`:                            true,
		`{"text_config": {"hidden_size": 8}}`:                                false,
	} {
		if got := DeclaresAutoMap([]byte(cfg)); got != want {
			t.Errorf("DeclaresAutoMap(%s) = %v, want %v", cfg, got, want)
		}
	}
}

// FuzzDeclaresAutoMap: any config bytes; whatever Go's JSON reader finds
// as a top-level auto_map key, DeclaresAutoMap must find too.
func FuzzDeclaresAutoMap(f *testing.F) {
	f.Add([]byte(`{"auto_map": "x"}`))
	f.Add([]byte(`{"a": NaN, "auto_map": {}}`))
	f.Add([]byte(`{"note": "\"auto_map\": 1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := DeclaresAutoMap(b)
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) == nil {
			if _, has := m["auto_map"]; has && !got {
				t.Fatalf("missed the auto_map in %q", b)
			}
		}
	})
}
