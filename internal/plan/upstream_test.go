package plan_test

import (
	"slices"
	"testing"
)

func TestUpstreamKeepsOnlyTheStepAndWhatItNeeds(t *testing.T) {
	p := benchPlan(t, "  a: {device: x86-laptop, format: gguf-q8_0}\n  b: {device: x86-laptop, format: gguf-q4_0}\n")
	sub := p.Upstream("gguf-quantize:q8_0")
	var ids []string
	for _, s := range sub.Steps {
		ids = append(ids, s.ID)
	}
	want := []string{"source", "gguf-convert:f16", "gguf-quantize:q8_0"}
	for _, w := range want {
		if !slices.Contains(ids, w) {
			t.Errorf("Upstream lacks %s: %v", w, ids)
		}
	}
	if len(ids) != len(want) {
		t.Errorf("Upstream holds %v, want only %v", ids, want)
	}
	if len(p.Steps) <= len(sub.Steps) {
		t.Error("Upstream changed the plan it was taken from")
	}
}
