// Package memplan is the comparison behind `BENCH memory-plan`: the memory
// weight the scheduler predicts for each step from its kind's constants and
// the model's size (engine.FormulaMemory) against the peak RSS the step
// really reached, as the cache's records (internal/runstats) keep it. The
// prediction never reads a record, so the comparison tests the constants;
// since the constants were fitted on these two models' records
// (docs/results/memory-weights.md), it is in sample for them, and a check
// against later runs.
//
// It is a package of its own, apart from the bench command, so that the
// comparison can be tested without any tool.
package memplan

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/benchstat"
	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/runstats"
	_ "github.com/edgepipe/edgepipe/pipelines" // the built-in format families' step kinds
	"github.com/edgepipe/edgepipe/steps"
)

// Tolerance is the goal: a kind's prediction within 25% of its peak.
const Tolerance = 0.25

const mib = 1 << 20

// Why a step has no measurement.
const (
	NoRecord  = "no record"                // never ran here, or cached before records were kept
	Failed    = "failed here"              // e.g. an NVIDIA kind on a host without a GPU
	InProcess = "no process (in edgepipe)" // ran no tool process: no peak RSS to compare
)

// LoadPlan reads a recipe into its steps as `edgepipe plan` does, without
// the memory pre-flight of the targets' devices, which weighs no step.
func LoadPlan(path string) (*plan.Plan, error) {
	r, err := recipe.Load(path, plan.Catalog{}, append(steps.Names(), "publish"))
	if err != nil {
		return nil, fmt.Errorf("load recipe %s: %w", path, err)
	}
	pl, err := plan.Expand(r)
	if err != nil {
		return nil, fmt.Errorf("plan recipe %s: %w", path, err)
	}
	return pl, nil
}

// Step is one step's prediction and, when it has one, its measurement.
type Step struct {
	ID, Kind string
	Basis    string // engine.MemoryModel, MemoryFixed or MemoryUnknown
	FixedMB  int64  // the kind's fixed part (its whole weight without a factor)
	Factor   float64
	Tensor   float64 // the kind's TensorFactor
	// ModelBytes is the size predicted for: the model the step's record
	// ran on, else the recipe's.
	ModelBytes int64
	// LargestTensor is the recipe's model's largest tensor (0: unknown).
	LargestTensor int64
	PredMB        int64
	MeasMB        float64 // peak RSS in MiB; 0 when unmeasured
	Why           string  // why unmeasured; "" when measured
}

// Err is (predicted - measured) / measured: negative when the weight is
// under what the step used.
func (s Step) Err() float64 { return (float64(s.PredMB) - s.MeasMB) / s.MeasMB }

// Compare predicts every step of the plan that has a kind (publishing has
// none) from the formula only and pairs it with its record in st. failed
// holds the ids of steps that failed in the run just made: whatever record
// they have is from another run, and they cannot run here. largestTensor
// is the recipe's model's largest tensor in bytes (0 if unknown).
func Compare(pl *plan.Plan, st *runstats.Store, failed map[string]bool, largestTensor int64) ([]Step, int64) {
	modelBytes := recipeModelBytes(pl, st)
	var out []Step
	for _, ps := range pl.Steps {
		k, ok := steps.Lookup(ps.Kind)
		if !ok {
			continue
		}
		r := k.Resources(ps.Params)
		s := Step{ID: ps.ID, Kind: ps.Kind, FixedMB: r.MemoryMB, Factor: r.ModelFactor, Tensor: r.TensorFactor,
			ModelBytes: modelBytes, LargestTensor: largestTensor}
		rec, ok := st.Last(runstats.Key(pl.Recipe.Name, ps.ID))
		switch {
		case failed[ps.ID]:
			s.Why = Failed
		case !ok:
			s.Why = NoRecord
		case rec.PeakRSS <= 0:
			s.Why = InProcess
		default:
			s.MeasMB = float64(rec.PeakRSS) / mib
			if rec.ModelBytes > 0 {
				s.ModelBytes = rec.ModelBytes
			}
		}
		s.PredMB, s.Basis = engine.FormulaMemory(r, engine.ModelSize{Bytes: s.ModelBytes, LargestTensor: s.LargestTensor})
		out = append(out, s)
	}
	return out, modelBytes
}

// recipeModelBytes is the model size most of the recipe's records ran on
// (one model per recipe: they agree unless the model changed between runs).
func recipeModelBytes(pl *plan.Plan, st *runstats.Store) int64 {
	count := map[int64]int{}
	var best int64
	for _, ps := range pl.Steps {
		rec, ok := st.Last(runstats.Key(pl.Recipe.Name, ps.ID))
		if !ok || rec.ModelBytes <= 0 {
			continue
		}
		count[rec.ModelBytes]++
		if c := count[rec.ModelBytes]; c > count[best] || c == count[best] && rec.ModelBytes > best {
			best = rec.ModelBytes
		}
	}
	return best
}

// Kind is one step kind's measured steps. Its error is that of its peak
// step (the largest measured peak), which its weight must cover: the
// weight depends on the kind and the model, not on a step's options, so a
// smaller step of the kind (a shorter context, a smaller type) is
// overweighted by the spread between them; Worst (the largest |error|)
// shows it.
type Kind struct {
	Kind  string
	Steps []Step // measured only
	Worst Step
	Peak  Step
}

// Err is the kind's error: its peak step's.
func (k Kind) Err() float64 { return k.Peak.Err() }

// Kinds groups the measured steps by kind, in name order.
func Kinds(ss []Step) []Kind {
	by := map[string]*Kind{}
	for _, s := range ss {
		if s.Why != "" {
			continue
		}
		k := by[s.Kind]
		if k == nil {
			k = &Kind{Kind: s.Kind, Worst: s, Peak: s}
			by[s.Kind] = k
		}
		k.Steps = append(k.Steps, s)
		if math.Abs(s.Err()) > math.Abs(k.Worst.Err()) {
			k.Worst = s
		}
		if s.MeasMB > k.Peak.MeasMB {
			k.Peak = s
		}
	}
	var out []Kind
	for _, k := range by {
		out = append(out, *k)
	}
	slices.SortFunc(out, func(a, b Kind) int { return cmp.Compare(a.Kind, b.Kind) })
	return out
}

// Summary is what the BENCH line reports for one model.
type Summary struct {
	Kinds      []Kind
	Steps      int // measured steps
	Unmeasured int
	MedianErr  float64 // median |error| over the kinds
	Worst      Kind    // the kind with the largest |error|
	Within     int     // kinds within Tolerance
	// StepsWithin counts measured steps within Tolerance on their own,
	// the options' spread included.
	StepsWithin int
}

// Summarize reduces the steps to the BENCH line's figures.
func Summarize(ss []Step) Summary {
	sum := Summary{Kinds: Kinds(ss)}
	for _, s := range ss {
		if s.Why == "" {
			sum.Steps++
			if math.Abs(s.Err()) <= Tolerance {
				sum.StepsWithin++
			}
		} else {
			sum.Unmeasured++
		}
	}
	var errs []float64
	for i, k := range sum.Kinds {
		e := math.Abs(k.Err())
		errs = append(errs, e)
		if e <= Tolerance {
			sum.Within++
		}
		if i == 0 || e > math.Abs(sum.Worst.Err()) {
			sum.Worst = k
		}
	}
	sum.MedianErr = benchstat.Median(errs)
	return sum
}

// WriteTable explains one model's figures: a row per measured kind (its
// peak step's prediction, measurement and error, and its worst step's
// error), then each unmeasured step and why.
func WriteTable(w io.Writer, model string, modelBytes int64, ss []Step, sum Summary) {
	fmt.Fprintf(w, "  memory-plan %s (model %.4g MiB): predicted from the formula only, measured = peak RSS in the cache's records\n",
		model, float64(modelBytes)/mib)
	fmt.Fprintf(w, "  %-22s %7s %-8s %12s %12s %8s %10s  %s\n", "kind", "steps", "basis", "pred_MiB", "peak_MiB", "err", "worst_err", "peak step")
	for _, k := range sum.Kinds {
		fmt.Fprintf(w, "  %-22s %7d %-8s %12d %12.1f %+7.1f%% %+9.1f%%  %s\n",
			k.Kind, len(k.Steps), k.Peak.Basis, k.Peak.PredMB, k.Peak.MeasMB, 100*k.Err(), 100*k.Worst.Err(), k.Peak.ID)
	}
	for _, s := range ss {
		if s.Why != "" {
			fmt.Fprintf(w, "  unmeasured %-32s %-22s pred %d MiB (%s): %s\n", s.ID, s.Kind, s.PredMB, s.Basis, s.Why)
		}
	}
}

// Fit says, per kind, how its constants would make the formula equal the
// kind's largest measured peak on this model: the factors' part scaled by
// (measured - fixed part) / that part for a kind with factors, the fixed
// weight itself for one without. Two constants cannot be fitted on one
// model: refit on each built-in model and choose constants that hold on
// both. It changes nothing.
func Fit(kinds []Kind) []string {
	var out []string
	for _, k := range kinds {
		p := k.Peak
		tensor := engine.ModelSize{Bytes: p.ModelBytes, LargestTensor: p.LargestTensor}.TensorBytes()
		scaled := (p.Factor*float64(p.ModelBytes) + p.Tensor*float64(tensor)) / mib
		if (p.Factor <= 0 && p.Tensor <= 0) || p.ModelBytes <= 0 || scaled <= 0 {
			out = append(out, fmt.Sprintf("%s: fixed weight %d MiB -> %.0f MiB (peak of %s)", k.Kind, p.FixedMB, p.MeasMB, p.ID))
			continue
		}
		x := (p.MeasMB - float64(p.FixedMB)) / scaled
		line := fmt.Sprintf("%s: ModelFactor %g -> %.2f, TensorFactor %g -> %.2f ((%.0f - %d MiB) / %.4g MiB scaled, peak of %s; model %.4g MiB, largest tensor %.4g MiB)",
			k.Kind, p.Factor, p.Factor*x, p.Tensor, p.Tensor*x, p.MeasMB, p.FixedMB, scaled, p.ID,
			float64(p.ModelBytes)/mib, float64(p.LargestTensor)/mib)
		if x < 0 {
			line += "; the fixed part alone is over the peak: lower MemoryMB instead"
		}
		out = append(out, line)
	}
	return out
}

// Field is one key=value of the BENCH line; the bench command renders
// the value as it renders its other lines' (floats to 3 digits, bools as
// yes/no).
type Field struct {
	Key   string
	Value any
}

// Fields are the BENCH line's keys after model=, in order, and its ratio:
// the worst kind's |error|. With no measured kind there is no error to
// report ("none") and the goal is not met.
func (sum Summary) Fields(modelBytes int64) (fields []Field, ratio float64) {
	medianErr, worstKind, worstErr := any("none"), "none", any("none")
	if len(sum.Kinds) > 0 {
		medianErr, worstKind, worstErr = sum.MedianErr, sum.Worst.Kind, sum.Worst.Err()
		ratio = math.Abs(sum.Worst.Err())
	}
	return []Field{
		{"model_bytes", modelBytes},
		{"kinds", len(sum.Kinds)},
		{"steps", sum.Steps},
		{"unmeasured", sum.Unmeasured},
		{"median_err", medianErr},
		{"worst_kind", worstKind},
		{"worst_err", worstErr},
		{"within_25pct", fmt.Sprintf("%d/%d", sum.Within, len(sum.Kinds))},
		{"steps_within_25pct", fmt.Sprintf("%d/%d", sum.StepsWithin, sum.Steps)},
		{"goal", "within 25%"},
		{"met", len(sum.Kinds) > 0 && sum.Within == len(sum.Kinds)},
	}, ratio
}

// ModelName is the built-in model's name ("smollm2-135m" for
// builtin:smollm2-135m), else the source's last path element.
func ModelName(pl *plan.Plan) string {
	src := pl.Recipe.Model.Source
	if name, ok := strings.CutPrefix(src, "builtin:"); ok {
		return name
	}
	return path.Base(strings.TrimRight(src, "/"))
}

// About is the benchmark's explanation, printed before its lines.
func About(recipes string) string {
	return "per step kind, the memory weight predicted from the formula alone (fixed part + factors x the model's bytes and its largest tensor's, or the kind's " +
		"fixed weight; never the records) vs the peak RSS recorded in the edgepipe cache (records/steps.json) for the steps of " +
		recipes + ", each made sure of first by `edgepipe run --keep-going` without --force (cached steps keep the records of " +
		"the run that made them; steps that fail here, e.g. NVIDIA, or ran no process are unmeasured); one line per model; " +
		"a kind's error is its peak step's (the largest measured peak, which its weight must cover); " +
		"ratio = the worst kind's |predicted - measured| / measured; goal: every kind within 25%"
}
