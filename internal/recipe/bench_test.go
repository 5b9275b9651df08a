package recipe

import "testing"

// A vision recipe's top-level bench: is every target's starting point: a
// target's own keys override only themselves; text-only keys are cleared.
func TestVisionBenchInherits(t *testing.T) {
	r, err := LoadBytes("r.yaml", []byte(`edgepipe: 1
name: v
task: image-classification
model: {source: ./m}
bench: {warmup: 3, threads: 2}
targets:
  a: {device: x86-laptop, format: onnx-fp32}
  b: {device: x86-laptop, format: onnx-int8, bench: {batch: 4}}
`), fakeCatalog{}, fakeKinds)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]BenchSpec{
		"a": {Warmup: 3, Runs: DefaultBenchRuns, Batch: 1, Threads: 2},
		"b": {Warmup: 3, Runs: DefaultBenchRuns, Batch: 4, Threads: 2},
	}
	for _, tg := range r.Targets {
		if tg.Bench == nil || *tg.Bench != want[tg.Name] {
			t.Errorf("%s: bench %+v, want %+v", tg.Name, tg.Bench, want[tg.Name])
		}
		if tg.BenchPos.Line == 0 {
			t.Errorf("%s: the bench has no position to report problems at", tg.Name)
		}
	}
	if r.Targets[0].Bench == r.Targets[1].Bench || r.Targets[0].Bench == r.Bench {
		t.Error("targets share one BenchSpec: an override would change the others")
	}
}

// A text model's bench keeps its defaults and has no batch.
func TestTextBenchDefaults(t *testing.T) {
	r, err := LoadBytes("r.yaml", []byte(`edgepipe: 1
name: t
model: {source: builtin:smollm2-135m}
targets:
  a: {device: x86-laptop, format: gguf-q8_0, bench: {}}
`), fakeCatalog{}, fakeKinds)
	if err != nil {
		t.Fatal(err)
	}
	want := BenchSpec{Warmup: DefaultBenchWarmup, Runs: DefaultBenchRuns, PromptTokens: DefaultBenchPromptTokens, ProbeMiB: DefaultBenchProbeMiB}
	if b := r.Targets[0].Bench; b == nil || *b != want {
		t.Errorf("bench %+v, want %+v", b, want)
	}
}
