package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/tools"
	"github.com/edgepipe/edgepipe/steps"

	// The device catalog names every built-in family's formats.
	_ "github.com/edgepipe/edgepipe/pipelines"
)

// testKindName is a step kind only these tests register: it writes its
// content followed by its inputs' out.bin to out.bin, so what it makes
// depends on what it reads, and it counts its runs.
const testKindName = "enginetest"

type testParams struct {
	Content  string   `json:"content"`
	Cores    int      `json:"cores"`
	MinCores int      `json:"min_cores"`
	MemoryMB int64    `json:"memory_mb"`
	Tools    []string `json:"tools"`
	// Fail makes the step fail with this message.
	Fail string `json:"fail"`
	// PPL and Baseline, when set, are recorded as a perplexity comparison
	// for the publish gate.
	PPL      float64 `json:"ppl"`
	Baseline float64 `json:"baseline"`
}

type testKind struct{}

// testFormat is a format only these tests register: its family converts
// with one enginetest step and checks the result with another.
const testFormat = "enginetest-fmt"

func init() {
	steps.Register(testKind{})
	// Its model is a string, with no tokenizer for the contract to read.
	plan.Register(plan.Family{Name: "enginetest", NoContract: true,
		Formats: catalog.FormatSet{Formats: []catalog.Format{{Name: testFormat, Family: "enginetest", BitsPerWeight: 8, RunsHere: "yes"}}},
		Expand: func(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
			conv := add(&plan.Step{ID: "convert", Kind: testKindName, Needs: []string{plan.SourceStepID},
				Params: &testParams{Content: "model", Tools: []string{"converter"}}}, t.Name)
			check := add(&plan.Step{ID: "check:" + t.Name, Kind: testKindName, Needs: []string{conv.ID},
				Params: &testParams{Content: "check", Tools: []string{"scorer"}, PPL: 10.2, Baseline: 10}, Data: plan.EvalData(r)}, t.Name)
			return conv, []string{check.ID}
		}})
}

func (testKind) Name() string   { return testKindName }
func (testKind) Version() int   { return 1 }
func (testKind) NewParams() any { return &testParams{} }
func (testKind) Tools(p any) []string {
	return steps.ParamsOf[testParams](p).Tools
}
func (testKind) Resources(p any) steps.Resources {
	tp := steps.ParamsOf[testParams](p)
	return steps.Resources{Cores: tp.Cores, MinCores: tp.MinCores, MemoryMB: tp.MemoryMB}
}

func (testKind) Run(ctx context.Context, sc *steps.Context) error {
	p := steps.ParamsOf[testParams](sc.Params)
	runs.add(sc.StepID, sc.Threads)
	if h := hookFor(sc.StepID); h != nil {
		if err := h(ctx, sc); err != nil {
			return err
		}
	}
	if p.Fail != "" {
		return fmt.Errorf("%s", p.Fail)
	}
	data := []byte(p.Content)
	for _, in := range sc.Inputs {
		if in.Kind != testKindName {
			continue
		}
		b, err := os.ReadFile(filepath.Join(in.Dir, "out.bin"))
		if err != nil {
			return err
		}
		data = append(append(data, '|'), b...)
	}
	if p.PPL != 0 {
		sc.Result.Perplexity = &steps.Perplexity{PPL: p.PPL, Baseline: p.Baseline, Backend: "test"}
	}
	sc.Result.SetFile("model", "out.bin")
	return os.WriteFile(filepath.Join(sc.Out, "out.bin"), data, 0o644)
}

// runLog counts each step's runs and the threads each was granted.
type runLog struct {
	mu      sync.Mutex
	count   map[string]int
	threads map[string]int
}

var runs = &runLog{}

func (r *runLog) add(id string, threads int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.count == nil {
		r.count, r.threads = map[string]int{}, map[string]int{}
	}
	r.count[id]++
	r.threads[id] = threads
}

func (r *runLog) runs(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[id]
}

func (r *runLog) granted(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.threads[id]
}

var hooks = struct {
	sync.Mutex
	m map[string]func(context.Context, *steps.Context) error
}{}

func hookFor(id string) func(context.Context, *steps.Context) error {
	hooks.Lock()
	defer hooks.Unlock()
	return hooks.m[id]
}

// setHook runs h at the start of step id's Run for the rest of the test.
func setHook(t *testing.T, id string, h func(context.Context, *steps.Context) error) {
	hooks.Lock()
	defer hooks.Unlock()
	if hooks.m == nil {
		hooks.m = map[string]func(context.Context, *steps.Context) error{}
	}
	hooks.m[id] = h
	t.Cleanup(func() {
		hooks.Lock()
		defer hooks.Unlock()
		delete(hooks.m, id)
	})
}

// fixture is a recipe folder with a local model, a cache and an output
// folder, from which each run makes a fresh plan and engine.
type fixture struct {
	t      *testing.T
	dir    string
	recipe string
	cache  *cache.Cache
	out    string
	tc     *fakeToolchains
	events []event.Event
	evMu   sync.Mutex
}

func newFixture(t *testing.T, recipeText string) *fixture {
	t.Helper()
	runs.mu.Lock()
	runs.count, runs.threads = nil, nil
	runs.mu.Unlock()
	dir := t.TempDir()
	f := &fixture{t: t, dir: dir, recipe: filepath.Join(dir, "recipe.yaml"), out: filepath.Join(dir, "artifacts"), tc: &fakeToolchains{}}
	for name, body := range map[string]string{
		"model/config.json":       `{"hidden_size": 64}`,
		"model/model.safetensors": "weights",
		"eval.txt":                "some evaluation text",
		"recipe.yaml":             recipeText,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cache.Open(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	f.cache = c
	return f
}

func (f *fixture) plan() *plan.Plan {
	f.t.Helper()
	b, err := os.ReadFile(f.recipe)
	if err != nil {
		f.t.Fatal(err)
	}
	// Parsed, not validated: the test family's format runs on no device
	// of the catalog.
	r, err := recipe.Parse(f.recipe, b)
	if err != nil {
		f.t.Fatal(err)
	}
	p, err := plan.Expand(r)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// engine makes the engine of a new run; opt's cache, output folder,
// tools, data and events are the fixture's.
func (f *fixture) engine(opt Options) *Engine {
	f.t.Helper()
	opt.Cache, opt.OutDir = f.cache, f.out
	opt.Tools = &tools.Resolver{Toolchains: f.tc}
	opt.Data = func(ref string) (string, error) { return filepath.Join(f.dir, ref), nil }
	opt.Version = "test"
	f.evMu.Lock()
	f.events = nil
	f.evMu.Unlock()
	opt.OnEvent = func(ev event.Event) {
		f.evMu.Lock()
		defer f.evMu.Unlock()
		f.events = append(f.events, ev)
	}
	return NewEngine(f.plan(), opt)
}

// eventsOf are the run's events of one type for one step.
func (f *fixture) eventsOf(typ, step string) []event.Event {
	f.evMu.Lock()
	defer f.evMu.Unlock()
	var out []event.Event
	for _, ev := range f.events {
		if ev.Type == typ && ev.Step == step {
			out = append(out, ev)
		}
	}
	return out
}

// fakeToolchains installs every tool asked for, in one pinned toolchain.
type fakeToolchains struct{}

func (fakeToolchains) Lookup(tool string) ([]string, string, string, string, error) {
	return []string{"/opt/test/" + tool}, "lock:" + tool, "1.0-" + tool, "testchain", nil
}

// header starts every test recipe: one target of the test family (steps
// convert, check:t1, publish:t1) before the test's own steps.
const header = `edgepipe: 1
name: et
model: {source: ./model}
data: {eval: eval.txt}
targets:
  t1: {device: x86-laptop, format: enginetest-fmt}
steps:
`

// rewrite replaces the recipe, as a user editing it between runs.
func (f *fixture) rewrite(recipeText string) {
	f.t.Helper()
	if err := os.WriteFile(f.recipe, []byte(recipeText), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// overlap measures how many of the steps it is hooked into run at once:
// each holds its slot for a while, so steps the scheduler lets overlap do.
type overlap struct {
	mu        sync.Mutex
	now, peak int
}

func (o *overlap) hook(ctx context.Context, _ *steps.Context) error {
	o.mu.Lock()
	o.now++
	o.peak = max(o.peak, o.now)
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.now--
		o.mu.Unlock()
	}()
	select {
	case <-time.After(150 * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (o *overlap) max() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.peak
}

// barrier lets the steps it is hooked into go on only once n of them run
// at once; a step still waiting after a few seconds fails, so steps the
// scheduler wrongly serializes fail the run instead of hanging it.
type barrier struct {
	mu      sync.Mutex
	n, seen int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) hook(ctx context.Context, sc *steps.Context) error {
	b.mu.Lock()
	if b.seen++; b.seen == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s: the %d steps never ran at once", sc.StepID, b.n)
	case <-ctx.Done():
		return ctx.Err()
	}
}
