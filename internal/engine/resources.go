package engine

import (
	"context"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"time"

	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/runstats"
	"github.com/edgepipe/edgepipe/steps"
)

// Memory prediction basis, as shown by `plan`.
const (
	MemoryFixed    = "fixed"    // the kind's own weight, not tied to the model
	MemoryModel    = "model"    // MemoryMB + ModelFactor x the model's bytes + TensorFactor x its largest tensor's
	MemoryMeasured = "measured" // the peak RSS of the kind's last run on a model of about this size
	MemoryUnknown  = "unknown"  // the model's size is not known yet (not fetched): the kind's fixed part
	MemoryEstimate = "estimate" // MemoryMB + ModelFactor x a size estimated from the model's shape (not fetched)
)

// measuredHeadroom is added to a measured peak: ru_maxrss is one process's
// peak, and a run on the same model may allocate a little differently.
const measuredHeadroom = 1.15

// Prediction is a step's expected cost before it runs.
type Prediction struct {
	MemoryMB   int64
	Basis      string
	ModelBytes int64
	MinCores   int
	MaxCores   int
	Estimate   time.Duration // the step's last duration; 0 if never run
}

func (e *Engine) stats() *runstats.Store {
	e.statsOnce.Do(func() {
		path := ""
		if e.opt.Cache != nil {
			path = e.opt.Cache.Root() + "/records/steps.json"
		}
		e.statsStore = runstats.Open(path)
	})
	return e.statsStore
}

func statsKey(p *plan.Plan, id string) string { return runstats.Key(p.Recipe.Name, id) }

// ModelSize is what the memory formula knows of the model: its bytes and
// its largest tensor's (0 when not known: the formula then counts the whole
// model in its place, which can only overweigh).
type ModelSize struct {
	Bytes         int64
	LargestTensor int64
}

// TensorBytes is the largest tensor's size as the formula counts it.
func (m ModelSize) TensorBytes() int64 {
	if m.LargestTensor > 0 {
		return m.LargestTensor
	}
	return m.Bytes
}

// modelBytes is the size of the fetched model (model.source), or 0 while
// it is not fetched. During a run it is known once the source step is
// done; for `plan`, when the source is cached or a local folder.
func (e *Engine) modelBytes(ctx context.Context, lookup bool) int64 {
	return e.model(ctx, lookup).Bytes
}

// ModelSize is the fetched model's size as the memory formula uses it,
// looking the source step up in the cache when it has not run here;
// zero while the source is not fetched.
func (e *Engine) ModelSize(ctx context.Context) ModelSize { return e.model(ctx, true) }

func (e *Engine) model(ctx context.Context, lookup bool) ModelSize {
	if n := e.modelSize.Load(); n > 0 {
		return ModelSize{Bytes: n, LargestTensor: e.largestTensor.Load()}
	}
	for _, s := range e.plan.Steps {
		if s.Kind != shared.Fetch.Name() {
			continue
		}
		out := e.output(s.ID)
		if out == nil && lookup {
			out, _ = e.cached(ctx, s)
		}
		if out == nil {
			return ModelSize{}
		}
		var n int64
		for _, f := range out.Files {
			n += f.Size
		}
		// Headers only; a source without safetensors (a GGUF) leaves it 0.
		largest, _ := edge.LargestTensorBytes(out.Dir)
		e.largestTensor.Store(largest)
		e.modelSize.Store(n)
		return ModelSize{Bytes: n, LargestTensor: largest}
	}
	return ModelSize{}
}

// predictMemory weighs a step: the peak RSS its kind reached last time on
// a model within a factor of two of this one (scaled to this size), else
// the kind's formula from the model's size, else its fixed weight.
func (e *Engine) predictMemory(kind string, r steps.Resources, m ModelSize) (int64, string) {
	if scalesWithModel(r) && m.Bytes > 0 {
		if peak, ok := e.stats().PeakRSS(kind, m.Bytes); ok {
			return int64(float64(peak)*measuredHeadroom) >> 20, MemoryMeasured
		}
	}
	return FormulaMemory(r, m)
}

func scalesWithModel(r steps.Resources) bool { return r.ModelFactor > 0 || r.TensorFactor > 0 }

// FormulaMemory is a step's memory weight from its kind's constants and
// the model's size alone, never from the measured records: the fixed part
// plus ModelFactor x the model's bytes plus TensorFactor x its largest
// tensor's (MemoryModel), the fixed weight of a kind without factors
// (MemoryFixed), or the fixed part while the size is not known
// (MemoryUnknown). The scheduler falls back to it without a measurement;
// `BENCH memory-plan` compares it with measured peaks, which is only a test
// of the constants while no measurement leaks into it.
func FormulaMemory(r steps.Resources, m ModelSize) (int64, string) {
	if !scalesWithModel(r) {
		return r.MemoryMB, MemoryFixed
	}
	if m.Bytes <= 0 {
		return r.MemoryMB, MemoryUnknown
	}
	scaled := r.ModelFactor*float64(m.Bytes) + r.TensorFactor*float64(m.TensorBytes())
	return r.MemoryMB + int64(scaled)>>20, MemoryModel
}

// Predict says, for each step of the plan, the memory weight and cores the
// scheduler will use and how long it took last time.
func (e *Engine) Predict(ctx context.Context) map[string]Prediction {
	return e.PredictAssuming(ctx, 0)
}

// PredictAssuming is Predict for a model not fetched here, whose size
// (estimated from its shape) is assumedBytes: the weights of a plan run
// elsewhere (Ray, Argo Workflows) must not fall back to the fixed part.
func (e *Engine) PredictAssuming(ctx context.Context, assumedBytes int64) map[string]Prediction {
	m := e.model(ctx, true)
	assumed := m.Bytes <= 0 && assumedBytes > 0
	if assumed {
		m = ModelSize{Bytes: assumedBytes}
	}
	out := map[string]Prediction{}
	for _, s := range e.plan.Steps {
		k, ok := steps.Lookup(s.Kind)
		if !ok {
			continue
		}
		r := k.Resources(s.Params)
		mem, basis := e.predictMemory(s.Kind, r, m)
		if assumed && basis == MemoryModel {
			basis = MemoryEstimate
		}
		hi := max(r.Cores, 1)
		lo := hi
		if r.MinCores > 0 && r.MinCores < hi {
			lo = r.MinCores
		}
		out[s.ID] = Prediction{MemoryMB: mem, Basis: basis, ModelBytes: m.Bytes, MinCores: lo, MaxCores: hi,
			Estimate: e.stats().Duration(statsKey(e.plan, s.ID))}
	}
	return out
}

// FormatPrediction is a step's prediction as `plan` shows it: memory and
// its basis, then the cores it may be granted ("mem 1.8G model, 1-2 cores").
func FormatPrediction(p Prediction) string {
	if p.MaxCores == 0 { // publishing: edgepipe's own work, no kind
		return fmt.Sprintf("%-29s", "-")
	}
	cores := fmt.Sprintf("%d cores", p.MaxCores)
	if p.MinCores < p.MaxCores {
		cores = fmt.Sprintf("%d-%d cores", p.MinCores, p.MaxCores)
	} else if p.MaxCores == 1 {
		cores = "1 core"
	}
	return fmt.Sprintf("mem %-5s %-8s %-9s", fmtMB(p.MemoryMB), p.Basis, cores)
}

func fmtMB(mb int64) string {
	if mb < 1024 {
		return fmt.Sprintf("%dM", mb)
	}
	return fmt.Sprintf("%.1fG", float64(mb)/1024)
}
