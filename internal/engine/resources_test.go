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
	if mb, basis := e.predictMemory("gguf-convert", r, 0); mb != 1024 || basis != MemoryUnknown {
		t.Fatalf("unknown size: %d %s", mb, basis)
	}
	// From the model: 1024 MB + 3 x 4 GiB.
	if mb, basis := e.predictMemory("gguf-convert", r, 4*gib); mb != 1024+12*1024 || basis != MemoryModel {
		t.Fatalf("4 GiB model: %d %s", mb, basis)
	}
	// A kind without a factor keeps its weight whatever the model.
	if mb, basis := e.predictMemory("fetch", steps.Resources{MemoryMB: 2048}, 4*gib); mb != 2048 || basis != MemoryFixed {
		t.Fatalf("fixed kind: %d %s", mb, basis)
	}
	// Measured last time on a 3 GiB model at 6 GiB peak: scaled to 4 GiB
	// (8 GiB) with headroom, instead of the formula.
	st.Observe("r/convert", runstats.Step{Kind: "gguf-convert", PeakRSS: 6 * gib, ModelBytes: 3 * gib})
	mb, basis := e.predictMemory("gguf-convert", r, 4*gib)
	peak := float64(8 * gib)
	if want := int64(peak*measuredHeadroom) >> 20; basis != MemoryMeasured || mb != want {
		t.Fatalf("measured: %d %s", mb, basis)
	}
	// A model far from any measured one falls back to the formula.
	if _, basis := e.predictMemory("gguf-convert", r, 40*gib); basis != MemoryModel {
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
	if mb, basis := FormulaMemory(r, model); mb != want || basis != MemoryModel {
		t.Fatalf("no records: %d %s, want %d model", mb, basis, want)
	}
	st.Observe("r/export", runstats.Step{Kind: "onnx-export", PeakRSS: 100 << 30, ModelBytes: model})
	if _, basis := e.predictMemory("onnx-export", r, model); basis != MemoryMeasured {
		t.Fatalf("the planted record was not used by the scheduler's prediction: %s", basis)
	}
	if mb, basis := FormulaMemory(r, model); mb != want || basis != MemoryModel {
		t.Fatalf("with a 100 GiB record: %d %s, want %d model", mb, basis, want)
	}
	// Without a factor, or before the size is known, the fixed part.
	if mb, basis := FormulaMemory(steps.Resources{MemoryMB: 256}, model); mb != 256 || basis != MemoryFixed {
		t.Fatalf("fixed kind: %d %s", mb, basis)
	}
	if mb, basis := FormulaMemory(r, 0); mb != 1536 || basis != MemoryUnknown {
		t.Fatalf("unknown size: %d %s", mb, basis)
	}
}
