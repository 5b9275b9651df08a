package plan_test

import (
	"encoding/json"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"slices"
	"strings"
	"testing"

	. "github.com/edgepipe/edgepipe/internal/plan"
	_ "github.com/edgepipe/edgepipe/pipelines"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/steps"
)

func benchPlan(t *testing.T, targets string) *Plan {
	t.Helper()
	r, err := recipe.Parse("bench.yaml", []byte("edgepipe: 1\nname: b\nmodel: {source: ./model}\ntargets:\n"+targets))
	if err != nil {
		t.Fatal(err)
	}
	if diags := recipe.Validate(r, Catalog{}, steps.Names()); len(diags) > 0 {
		t.Fatal(diags)
	}
	p, err := Expand(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBenchDefaultsAndEmptySections(t *testing.T) {
	for _, section := range []string{"bench:", "bench: {}"} {
		p := benchPlan(t, "  q8:\n    device: x86-laptop\n    format: gguf-q8_0\n    "+section+"\n")
		b := p.Recipe.Targets[0].Bench
		if b == nil || b.Warmup != 10 || b.Runs != 50 || b.PromptTokens != 128 || b.Threads != 0 || b.ProbeMiB != 1024 {
			t.Errorf("%q: bench = %+v, want the defaults", section, b)
		}
		s, ok := p.Step("bench:gguf-quantize:q8_0")
		if !ok {
			t.Fatalf("%q: no bench step with the default id; steps: %v", section, ids(p))
		}
		if s.Kind != "bench" || s.Params.(*shared.BenchParams).Backend != "llama.cpp" || s.Needs[0] != "gguf-quantize:q8_0" {
			t.Errorf("bench step = %+v", s)
		}
		pub, _ := p.Step(PublishStepID("q8"))
		if !slices.Contains(pub.Needs, s.ID) {
			t.Errorf("publish:q8 needs %v, not the bench", pub.Needs)
		}
	}
	p := benchPlan(t, "  q8:\n    device: x86-laptop\n    format: gguf-q8_0\n")
	for _, s := range p.Steps {
		if s.Kind == "bench" {
			t.Errorf("a target without bench: got step %s", s.ID)
		}
	}
}

// Two targets of one model with the same settings share a measurement;
// other settings make another step, named by what differs.
func TestBenchStepsAreSharedBySettings(t *testing.T) {
	p := benchPlan(t, `  a: {device: x86-laptop, format: onnx-fp32, bench: {runs: 5}}
  b: {device: apple-m4, format: onnx-fp32, bench: {runs: 5}}
  c: {device: x86-laptop, format: onnx-fp32, bench: {runs: 5, threads: 1}}
`)
	var benches []string
	for _, s := range p.Steps {
		if s.Kind == "bench" {
			benches = append(benches, s.ID)
			if b := s.Params.(*shared.BenchParams).Backend; b != "onnxruntime" {
				t.Errorf("%s: backend %v", s.ID, b)
			}
		}
	}
	want := []string{"bench:onnx-export:fp32+runs=5", "bench:onnx-export:fp32+runs=5+threads=1"}
	if strings.Join(benches, " ") != strings.Join(want, " ") {
		t.Errorf("bench steps %v, want %v", benches, want)
	}
	s, _ := p.Step(want[0])
	if strings.Join(s.Targets, ",") != "a,b" {
		t.Errorf("%s serves %v, want a and b", s.ID, s.Targets)
	}
}

// Budgets are part of the publish step's params (so a changed budget
// republishes), but only when set, so targets without budgets keep their
// keys.
func TestBudgetsJoinThePublishParamsOnlyWhenSet(t *testing.T) {
	p := benchPlan(t, `  a: {device: x86-laptop, format: gguf-q8_0, min_tokens_per_s: 5, max_first_token_ms: 200}
  b: {device: x86-laptop, format: gguf-q8_0}
`)
	params := func(id string) map[string]any {
		s, _ := p.Step(PublishStepID(id))
		b, _ := json.Marshal(s.Params)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	a := params("a")
	if a["min_tokens_per_s"] != float64(5) || a["max_first_token_ms"] != float64(200) {
		t.Errorf("publish:a params %v", a)
	}
	if _, ok := a["max_memory_gb"]; ok {
		t.Errorf("publish:a has an unset budget: %v", a)
	}
	b := params("b")
	for _, k := range []string{"min_tokens_per_s", "max_memory_gb", "max_first_token_ms"} {
		if _, ok := b[k]; ok {
			t.Errorf("publish:b has %s", k)
		}
	}
}

func TestBenchRefusesFormatsWithoutTokenByTokenDecode(t *testing.T) {
	for format, ok := range map[string]bool{"gguf-q4_k_m": true, "gguf-f16": true, "onnx-fp32": true, "onnx-int4": true,
		"qnn-w8a16": false, "coreml-int4": false, "mlc-q4f16_1": false, "gptq-w4a16": false, "nope": false} {
		if _, got := BenchBackend(format); got != ok {
			t.Errorf("BenchBackend(%s) = %v, want %v", format, got, ok)
		}
	}
	r, err := recipe.Parse("bench.yaml", []byte("edgepipe: 1\nname: b\nmodel: {source: ./model}\ntargets:\n  p:\n    device: apple-a18\n    format: coreml-int4\n    bench: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	diags := recipe.Validate(r, Catalog{}, nil)
	if len(diags) != 1 || diags[0].Pos.Line != 8 || !strings.Contains(diags[0].Msg, "bench cannot measure coreml-int4") {
		t.Errorf("diagnostics: %v", diags)
	}
}

func ids(p *Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.ID)
	}
	return out
}
