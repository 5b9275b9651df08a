package recipewrite

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// A scalar written into a recipe line reads back as the same value, and
// stays on the line: plain where YAML keeps it a string, quoted where it
// would read as something else or span lines.
func TestScalar(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{"laptop", "laptop"},
		{"hf://HuggingFaceTB/SmolLM2-135M-Instruct", "hf://HuggingFaceTB/SmolLM2-135M-Instruct"},
		{"yes", `"yes"`},     // a YAML 1.1 boolean to some readers
		{"true", `"true"`},   // a boolean
		{"1.0", `"1.0"`},     // a number
		{"null", `"null"`},   // nothing
		{"a: b", `'a: b'`},   // a mapping
		{"#tag", `'#tag'`},   // a comment
		{"", `""`},           // empty
		{"@home", "'@home'"}, // a reserved indicator
		{"line\nbreak", `"line\nbreak"`},
		{"tab\there", "\"tab\\there\""},
		{42, "42"},
		{0.5, "0.5"},
		{true, "true"},
	} {
		got := Scalar(tc.in)
		if got != tc.want {
			t.Errorf("Scalar(%#v) = %s, want %s", tc.in, got, tc.want)
		}
		if strings.Contains(got, "\n") {
			t.Errorf("Scalar(%#v) spans lines: %q", tc.in, got)
		}
		var back map[string]any
		if err := yaml.Unmarshal([]byte("k: "+got+"\n"), &back); err != nil {
			t.Errorf("k: %s does not parse: %v", got, err)
			continue
		}
		if back["k"] != tc.in {
			t.Errorf("Scalar(%#v) = %s reads back as %#v", tc.in, got, back["k"])
		}
	}
}
