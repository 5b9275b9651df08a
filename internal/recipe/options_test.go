package recipe

import (
	"strings"
	"testing"
)

type testOptions struct {
	Shared `yaml:",inline"`
	Group  *int     `yaml:"group_size" min:"1"`
	Ratio  float64  `yaml:"ratio" min:"0"`
	Mode   *string  `yaml:"mode" enum:"fast,slow"`
	Tags   []string `yaml:"tags"`
}

type Shared struct {
	Opset *int `yaml:"opset" min:"17"`
}

func TestDecodeOptions(t *testing.T) {
	at := map[string]Pos{"": {File: "r.yaml", Line: 1, Col: 1}}
	var o testOptions
	diags := DecodeOptions(map[string]any{"group_size": float64(32), "ratio": 1, "mode": "slow", "tags": []any{"a"}, "opset": 18}, at, "with", &o)
	if len(diags) != 0 || *o.Group != 32 || o.Ratio != 1 || *o.Mode != "slow" || o.Tags[0] != "a" || *o.Opset != 18 {
		t.Fatalf("decoded %+v, diags %v", o, diags)
	}
	for _, tc := range []struct {
		with map[string]any
		want string
	}{
		{map[string]any{"group_size": 1.5}, "with.group_size must be a whole number, not 1.5"},
		{map[string]any{"group_size": "64"}, `with.group_size must be a whole number, not the string "64"`},
		{map[string]any{"group_size": 0}, "with.group_size must be at least 1, not 0"},
		{map[string]any{"opset": 13}, "with.opset must be at least 17, not 13"},
		{map[string]any{"mode": "fats"}, `with.mode is "fats", which is not one of its values (did you mean "fast"?)`},
		{map[string]any{"tags": "a"}, `with.tags must be a list of strings, not the string "a"`},
		{map[string]any{"grup_size": 64}, `with: unknown option "grup_size"`},
		{map[string]any{"ratio": nil}, "with.ratio is empty"},
	} {
		var o testOptions
		d := DecodeOptions(tc.with, at, "with", &o)
		if len(d) != 1 || !strings.Contains(d[0].Msg, tc.want) || d[0].Pos.Line != 1 {
			t.Errorf("%v: got %v, want %q", tc.with, d, tc.want)
		}
	}
	if d := DecodeOptions(map[string]any{"grup_size": 64}, at, "with", &testOptions{}); !strings.Contains(d[0].Hint, `did you mean "group_size"?`) {
		t.Errorf("hint %q", d[0].Hint)
	}
}
