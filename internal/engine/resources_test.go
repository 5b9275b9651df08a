package engine

import (
	"testing"

	"github.com/edgepipe/edgepipe/internal/runstats"
	"github.com/edgepipe/edgepipe/steps"
)

func engineWithStats(st *runstats.Store) *Engine {
	e := &Engine{}
	e.statsOnce.Do(func() { e.statsStore = st })
	return e
}

func TestPredictMemory(t *testing.T) {
	st := runstats.Open("")
	e := engineWithStats(st)
	r := steps.Resources{MemoryMB: 1024, ModelFactor: 3}
	const gib = int64(1) << 30

	// No model size yet: the fixed part, and it says so.
	if mb, basis := e.predictMemory("gguf-convert", r, ModelSize{Bytes: 0}); mb != 1024 || basis != MemoryUnknown {
		t.Fatalf("unknown size: %d %s", mb, basis)
	}
	// From the model: 1024 MB + 3 x 4 GiB.
	if mb, basis := e.predictMemory("gguf-convert", r, ModelSize{Bytes: 4 * gib}); mb != 1024+12*1024 || basis != MemoryModel {
		t.Fatalf("4 GiB model: %d %s", mb, basis)
	}
	// A kind without a factor keeps its weight whatever the model.
	if mb, basis := e.predictMemory("fetch", steps.Resources{MemoryMB: 2048}, ModelSize{Bytes: 4 * gib}); mb != 2048 || basis != MemoryFixed {
		t.Fatalf("fixed kind: %d %s", mb, basis)
	}
	// Measured last time on a 3 GiB model at 6 GiB peak: scaled to 4 GiB
	// (8 GiB) with headroom, instead of the formula.
	st.Observe("r/convert", runstats.Step{Kind: "gguf-convert", PeakRSS: 6 * gib, ModelBytes: 3 * gib})
	mb, basis := e.predictMemory("gguf-convert", r, ModelSize{Bytes: 4 * gib})
	peak := float64(8 * gib)
	if want := int64(peak*measuredHeadroom) >> 20; basis != MemoryMeasured || mb != want {
		t.Fatalf("measured: %d %s", mb, basis)
	}
	// A model far from any measured one falls back to the formula.
	if _, basis := e.predictMemory("gguf-convert", r, ModelSize{Bytes: 40 * gib}); basis != MemoryModel {
		t.Fatalf("40 GiB model used a 3 GiB measurement: %s", basis)
	}
}

// FormulaMemory is the out-of-sample prediction BENCH memory-plan checks:
// a record that predictMemory would take must not move it.
func TestFormulaMemoryIgnoresRecords(t *testing.T) {
	st := runstats.Open("")
	e := engineWithStats(st)
	r := steps.Resources{MemoryMB: 1536, ModelFactor: 6}
	const mib = int64(1) << 20
	model := 256 * mib
	want := int64(1536 + 6*256)
	if mb, basis := FormulaMemory(r, ModelSize{Bytes: model}); mb != want || basis != MemoryModel {
		t.Fatalf("no records: %d %s, want %d model", mb, basis, want)
	}
	st.Observe("r/export", runstats.Step{Kind: "onnx-export", PeakRSS: 100 << 30, ModelBytes: model})
	if _, basis := e.predictMemory("onnx-export", r, ModelSize{Bytes: model}); basis != MemoryMeasured {
		t.Fatalf("the planted record was not used by the scheduler's prediction: %s", basis)
	}
	if mb, basis := FormulaMemory(r, ModelSize{Bytes: model}); mb != want || basis != MemoryModel {
		t.Fatalf("with a 100 GiB record: %d %s, want %d model", mb, basis, want)
	}
	// Without a factor, or before the size is known, the fixed part.
	if mb, basis := FormulaMemory(steps.Resources{MemoryMB: 256}, ModelSize{Bytes: model}); mb != 256 || basis != MemoryFixed {
		t.Fatalf("fixed kind: %d %s", mb, basis)
	}
	if mb, basis := FormulaMemory(r, ModelSize{Bytes: 0}); mb != 1536 || basis != MemoryUnknown {
		t.Fatalf("unknown size: %d %s", mb, basis)
	}
}

// TensorFactor weighs the largest tensor: a model of the same bytes with a
// larger embedding weighs more; without a known largest tensor the whole
// model stands in for it, which can only overweigh.
func TestFormulaMemoryLargestTensor(t *testing.T) {
	const mib = int64(1) << 20
	r := steps.Resources{MemoryMB: 500, ModelFactor: 1, TensorFactor: 4}
	small := ModelSize{Bytes: 1000 * mib, LargestTensor: 100 * mib}
	large := ModelSize{Bytes: 1000 * mib, LargestTensor: 600 * mib}
	if mb, basis := FormulaMemory(r, small); mb != 500+1000+400 || basis != MemoryModel {
		t.Fatalf("small embedding: %d %s", mb, basis)
	}
	if mb, _ := FormulaMemory(r, large); mb != 500+1000+2400 {
		t.Fatalf("large embedding: %d", mb)
	}
	if mb, _ := FormulaMemory(r, ModelSize{Bytes: 1000 * mib}); mb != 500+1000+4000 {
		t.Fatalf("unknown largest tensor: %d", mb)
	}
	// A tensor factor alone makes the kind scale with the model.
	if mb, basis := FormulaMemory(steps.Resources{MemoryMB: 100, TensorFactor: 2}, small); mb != 300 || basis != MemoryModel {
		t.Fatalf("tensor factor only: %d %s", mb, basis)
	}
}
