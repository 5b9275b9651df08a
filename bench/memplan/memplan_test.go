package memplan

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/runstats"
	"github.com/edgepipe/edgepipe/steps"
)

// testKind has constants the tests choose, so that refitting the real
// kinds' constants never changes what these tests expect.
type testKind struct {
	name string
	r    steps.Resources
}

func (k testKind) Name() string                            { return k.name }
func (testKind) Version() int                              { return 1 }
func (testKind) NewParams() any                            { return nil }
func (testKind) Tools(any) []string                        { return nil }
func (k testKind) Resources(any) steps.Resources           { return k.r }
func (testKind) Run(context.Context, *steps.Context) error { return nil }

func init() {
	// 1000 MiB + 2 x the model; a fixed 500 MiB; 300 MiB + 2 x the model
	// + 4 x its largest tensor.
	steps.Register(testKind{"mp-convert", steps.Resources{MemoryMB: 1000, ModelFactor: 2}})
	steps.Register(testKind{"mp-fixed", steps.Resources{MemoryMB: 500}})
	steps.Register(testKind{"mp-quant", steps.Resources{MemoryMB: 300, ModelFactor: 2, TensorFactor: 4}})
}

// predictions: convert 1200, fixed 500, quant 700 MiB
const (
	model   = 100 * mib
	largest = 50 * mib
)

func testPlan() *plan.Plan {
	return &plan.Plan{Recipe: &recipe.Recipe{Name: "syn", Model: recipe.Model{Source: "builtin:tiny-1m"}},
		Steps: []*plan.Step{
			{ID: "convert", Kind: "mp-convert"},
			{ID: "fixed", Kind: "mp-fixed"},
			{ID: "quant:a", Kind: "mp-quant"},
			{ID: "quant:b", Kind: "mp-quant"},
			{ID: "nvidia", Kind: "mp-quant"},
			{ID: "publish:x", Kind: "publish"}, // no kind: not weighed, not listed
		}}
}

// records writes a records file as the engine's runstats does, and opens
// it: the bench reads the cache's file, not an in-memory store.
func records(t *testing.T, peaksMiB map[string]float64) *runstats.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "records", "steps.json")
	w := runstats.Open(path)
	kinds := map[string]string{"convert": "mp-convert", "fixed": "mp-fixed", "quant:a": "mp-quant", "quant:b": "mp-quant", "nvidia": "mp-quant"}
	for id, p := range peaksMiB {
		w.Observe(runstats.Key("syn", id), runstats.Step{Kind: kinds[id], PeakRSS: int64(p * mib), ModelBytes: model})
	}
	if err := w.Save(); err != nil {
		t.Fatal(err)
	}
	return runstats.Open(path)
}

func field(fs []Field, key string) any {
	for _, f := range fs {
		if f.Key == key {
			return f.Value
		}
	}
	return nil
}

func TestCompareAndSummarize(t *testing.T) {
	for _, tc := range []struct {
		name        string
		peaks       map[string]float64
		failed      map[string]bool
		kinds       int
		steps       int
		unmeasured  int
		worstKind   string
		worstErr    float64
		within      int
		stepsWithin int
		median      float64
		met         bool
	}{
		{
			name:  "all within 25%",
			peaks: map[string]float64{"convert": 1000, "fixed": 500, "quant:a": 700, "quant:b": 600},
			// convert +20%, fixed 0, quant: a 0, b +16.7% -> the kind's error is
			// its peak step's, a's.
			kinds: 3, steps: 4, unmeasured: 1, worstKind: "mp-convert", worstErr: 0.2, within: 3, stepsWithin: 4, median: 0, met: true,
		},
		{
			name:  "an under-prediction is the worst",
			peaks: map[string]float64{"convert": 1200, "fixed": 1000, "quant:a": 700},
			// fixed predicts 500 for 1000 measured: -50%.
			kinds: 3, steps: 3, unmeasured: 2, worstKind: "mp-fixed", worstErr: -0.5, within: 2, stepsWithin: 2, median: 0, met: false,
		},
		{
			name:   "a failed step's old record is not a measurement, nor is a peak of 0",
			peaks:  map[string]float64{"convert": 1200, "fixed": 0, "nvidia": 10},
			failed: map[string]bool{"nvidia": true},
			kinds:  1, steps: 1, unmeasured: 4, worstKind: "mp-convert", worstErr: 0, within: 1, stepsWithin: 1, median: 0, met: true,
		},
		{
			name:  "nothing measured: no goal met",
			peaks: map[string]float64{},
			kinds: 0, steps: 0, unmeasured: 5, worstKind: "none", within: 0, met: false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss, mb := Compare(testPlan(), records(t, tc.peaks), tc.failed, largest)
			if len(ss) != 5 {
				t.Fatalf("%d steps compared, want the 5 with a kind", len(ss))
			}
			if len(tc.peaks) > 0 && mb != model {
				t.Errorf("model bytes %d, want %d", mb, model)
			}
			sum := Summarize(ss)
			fields, ratio := sum.Fields(mb)
			if len(sum.Kinds) != tc.kinds || sum.Steps != tc.steps || sum.Unmeasured != tc.unmeasured || sum.Within != tc.within || sum.StepsWithin != tc.stepsWithin {
				t.Errorf("kinds %d steps %d unmeasured %d within %d steps within %d, want %d %d %d %d %d",
					len(sum.Kinds), sum.Steps, sum.Unmeasured, sum.Within, sum.StepsWithin, tc.kinds, tc.steps, tc.unmeasured, tc.within, tc.stepsWithin)
			}
			if got := field(fields, "worst_kind"); got != tc.worstKind {
				t.Errorf("worst_kind %v, want %s", got, tc.worstKind)
			}
			if got := field(fields, "met"); got != tc.met {
				t.Errorf("met %v, want %v", got, tc.met)
			}
			if tc.kinds == 0 {
				if ratio != 0 || field(fields, "worst_err") != "none" || field(fields, "median_err") != "none" {
					t.Errorf("nothing measured, yet ratio %g, worst_err %v, median_err %v", ratio, field(fields, "worst_err"), field(fields, "median_err"))
				}
				return
			}
			if got := field(fields, "worst_err").(float64); math.Abs(got-tc.worstErr) > 1e-9 || math.Abs(ratio-math.Abs(tc.worstErr)) > 1e-9 {
				t.Errorf("worst_err %g ratio %g, want %g", got, ratio, tc.worstErr)
			}
			if got := field(fields, "median_err").(float64); math.Abs(got-tc.median) > 1e-9 {
				t.Errorf("median_err %g, want %g", got, tc.median)
			}
		})
	}
}

// The prediction must be out of sample: a record, however far from the
// formula, never moves it, though the scheduler's own prediction would take
// it (runstats finds it for the kind at this model size).
func TestPredictionIgnoresRecords(t *testing.T) {
	st := records(t, map[string]float64{"convert": 64 * 1024, "quant:a": 1})
	if peak, ok := st.PeakRSS("mp-convert", model); !ok || peak != 64<<30 {
		t.Fatalf("the planted record is not what the scheduler would use: %d %v", peak, ok)
	}
	ss, _ := Compare(testPlan(), st, nil, largest)
	want := map[string]int64{"convert": 1200, "fixed": 500, "quant:a": 700, "quant:b": 700, "nvidia": 700}
	for _, s := range ss {
		if s.PredMB != want[s.ID] {
			t.Errorf("%s predicted %d MiB, want the formula's %d", s.ID, s.PredMB, want[s.ID])
		}
		if s.ID == "convert" && (s.MeasMB != 64*1024 || s.Basis != "model") {
			t.Errorf("convert: measured %g basis %s", s.MeasMB, s.Basis)
		}
	}
}

func TestTableAndFit(t *testing.T) {
	ss, mb := Compare(testPlan(), records(t, map[string]float64{"convert": 1000, "fixed": 800, "quant:a": 1100, "quant:b": 200}), nil, largest)
	sum := Summarize(ss)
	var b strings.Builder
	WriteTable(&b, "tiny-1m", mb, ss, sum)
	table := b.String()
	for _, want := range []string{
		"memory-plan tiny-1m (model 100 MiB)",
		"mp-convert                   1 model            1200       1000.0   +20.0%     +20.0%  convert",
		"mp-fixed                     1 fixed             500        800.0   -37.5%     -37.5%  fixed",
		// quant: the kind's error is its peak step's, a (-36.4%); b, its
		// worst, is overweighted +250%.
		"mp-quant                     2 model             700       1100.0   -36.4%    +250.0%  quant:a",
		"unmeasured nvidia",
		"no record",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	fit := strings.Join(Fit(sum.Kinds), "\n")
	for _, want := range []string{
		// (1000 - 1000) / 200 scaled
		"mp-convert: ModelFactor 2 -> 0.00, TensorFactor 0 -> 0.00 ((1000 - 1000 MiB) / 200 MiB scaled, peak of convert; model 100 MiB, largest tensor 50 MiB)",
		"mp-fixed: fixed weight 500 MiB -> 800 MiB (peak of fixed)",
		// the kind's largest peak, a's: (1100 - 300) / 400 = 2x both factors
		"mp-quant: ModelFactor 2 -> 4.00, TensorFactor 4 -> 8.00 ((1100 - 300 MiB) / 400 MiB scaled, peak of quant:a",
	} {
		if !strings.Contains(fit, want) {
			t.Errorf("fit lacks %q:\n%s", want, fit)
		}
	}
}

func TestFitBelowTheFixedPart(t *testing.T) {
	ss, _ := Compare(testPlan(), records(t, map[string]float64{"convert": 900}), nil, largest)
	if fit := Fit(Summarize(ss).Kinds); len(fit) != 1 || !strings.Contains(fit[0], "-> -1.00") || !strings.Contains(fit[0], "lower MemoryMB") {
		t.Errorf("fit: %q", fit)
	}
}

// Without the model's largest tensor the whole model stands in for it.
func TestUnknownLargestTensor(t *testing.T) {
	ss, _ := Compare(testPlan(), records(t, map[string]float64{"quant:a": 700}), nil, 0)
	for _, s := range ss {
		if s.ID == "quant:a" && s.PredMB != 300+200+400 {
			t.Errorf("quant:a predicted %d MiB without a largest tensor, want 900", s.PredMB)
		}
	}
}

func TestFailedSteps(t *testing.T) {
	got, err := failedSteps([]byte(`{"event":"step-started","step":"a"}
{"event":"step-failed","step":"nvidia","message":"needs an NVIDIA GPU"}
{"event":"step-finished","step":"a"}
`))
	if err != nil || len(got) != 1 || !got["nvidia"] {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := failedSteps([]byte("not json")); err == nil {
		t.Fatal("a line that is no event passed")
	}
}

func TestLoadPlanOfTheBuiltinRecipes(t *testing.T) {
	for r, model := range map[string]string{"all-targets.yaml": "smollm2-135m", "gemma.yaml": "gemma3-270m"} {
		pl, err := LoadPlan(filepath.Join("..", "..", "recipes", r))
		if err != nil {
			t.Fatal(err)
		}
		if got := ModelName(pl); got != model {
			t.Errorf("%s: model %s, want %s", r, got, model)
		}
		ss, _ := Compare(pl, runstats.Open(""), nil, 0)
		if len(ss) < 10 {
			t.Errorf("%s: only %d steps weighed", r, len(ss))
		}
		for _, s := range ss {
			if s.Why != NoRecord {
				t.Errorf("%s: %s measured with no records: %+v", r, s.ID, s)
			}
		}
	}
}

func TestCacheRoot(t *testing.T) {
	t.Setenv("EDGEPIPE_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/x")
	if got, _ := cacheRoot(""); got != "/x/edgepipe" {
		t.Errorf("XDG: %s", got)
	}
	t.Setenv("EDGEPIPE_CACHE", "/c")
	if got, _ := cacheRoot(""); got != "/c" {
		t.Errorf("EDGEPIPE_CACHE: %s", got)
	}
	if got, _ := cacheRoot("/explicit"); got != "/explicit" {
		t.Errorf("explicit: %s", got)
	}
}
