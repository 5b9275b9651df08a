package engine

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/publish"
)

// -j bounds the steps running at once: at -j 1 none overlap, at -j 3
// three independent steps run together.
func TestJobsBoundStepsAtOnce(t *testing.T) {
	const recipeText = header + `  p1: {uses: enginetest, with: {content: "1"}}
  p2: {uses: enginetest, with: {content: "2"}}
  p3: {uses: enginetest, with: {content: "3"}}
`
	f := newFixture(t, recipeText)
	o := &overlap{}
	for _, id := range []string{"p1", "p2", "p3", "convert", "check:t1"} {
		setHook(t, id, o.hook)
	}
	if _, err := f.engine(Options{Jobs: 1}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o.max() != 1 {
		t.Errorf("-j 1 ran %d steps at once", o.max())
	}

	f = newFixture(t, recipeText)
	b := newBarrier(3)
	for _, id := range []string{"p1", "p2", "p3"} {
		setHook(t, id, b.hook)
	}
	setHook(t, "convert", nil)
	setHook(t, "check:t1", nil)
	if _, err := f.engine(Options{Jobs: 3}).Run(context.Background()); err != nil {
		t.Fatalf("-j 3: %v", err)
	}
}

// A step's Cores come out of a budget of every core of the machine: two
// steps that each want all of them never overlap, even at -j 2, and each
// is granted (told) all of them.
func TestCoreBudgetSerializesWideSteps(t *testing.T) {
	all := coreBudget(2)
	f := newFixture(t, header+`  w1: {uses: enginetest, needs: [t1], with: {content: "1", cores: `+strconv.Itoa(all)+`}}
  w2: {uses: enginetest, needs: [t1], with: {content: "2", cores: `+strconv.Itoa(all)+`}}
`)
	o := &overlap{}
	setHook(t, "w1", o.hook)
	setHook(t, "w2", o.hook)
	res, err := f.engine(Options{Jobs: 2}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if o.max() != 1 {
		t.Errorf("two steps of %d cores each ran at once on a budget of %d", all, all)
	}
	for _, id := range []string{"w1", "w2"} {
		if got := runs.granted(id); got != all {
			t.Errorf("%s was granted %d threads, want its %d cores", id, got, all)
		}
		if got := res.Outputs[id].Result.Threads; got != all {
			t.Errorf("%s's result records %d threads, want %d", id, got, all)
		}
	}
}

// An elastic step (MinCores under Cores) alone gets every core of the
// machine, whatever -j says; a fixed step gets its Cores even past the
// machine's; two elastic steps at once share the budget, each with at
// least its minimum.
func TestElasticGrants(t *testing.T) {
	for _, jobs := range []int{1, 2} {
		f := newFixture(t, header+`  wide: {uses: enginetest, needs: [t1], with: {content: w, min_cores: 1, cores: 1000}}
  fixed: {uses: enginetest, needs: [wide], with: {content: f, cores: `+strconv.Itoa(runtime.NumCPU()+1)+`}}
`)
		if _, err := f.engine(Options{Jobs: jobs}).Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, want := runs.granted("wide"), coreBudget(jobs); got != want || want < runtime.NumCPU() {
			t.Errorf("-j %d: an elastic step alone was granted %d threads, want every core (%d)", jobs, got, want)
		}
		if got := runs.granted("fixed"); got != runtime.NumCPU()+1 {
			t.Errorf("-j %d: a step of %d cores was granted %d", jobs, runtime.NumCPU()+1, got)
		}
	}

	f := newFixture(t, header+`  e1: {uses: enginetest, needs: [t1], with: {content: "1", min_cores: 1, cores: 1000}}
  e2: {uses: enginetest, needs: [t1], with: {content: "2", min_cores: 1, cores: 1000}}
`)
	b := newBarrier(2)
	setHook(t, "e1", b.hook)
	setHook(t, "e2", b.hook)
	if _, err := f.engine(Options{Jobs: 2}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	g1, g2 := runs.granted("e1"), runs.granted("e2")
	if g1 < 1 || g2 < 1 || g1+g2 > coreBudget(2) {
		t.Errorf("two elastic steps at once were granted %d and %d threads of %d cores", g1, g2, coreBudget(2))
	}
}

// The memory budget holds back a step whose weight does not fit next to
// the running ones; a step heavier than the whole budget still runs,
// alone.
func TestMemoryBudget(t *testing.T) {
	const recipeText = header + `  m1: {uses: enginetest, needs: [t1], with: {content: "1", memory_mb: 600}}
  m2: {uses: enginetest, needs: [t1], with: {content: "2", memory_mb: 600}}
`
	f := newFixture(t, recipeText)
	o := &overlap{}
	setHook(t, "m1", o.hook)
	setHook(t, "m2", o.hook)
	if _, err := f.engine(Options{Jobs: 2, MaxMemoryMB: 1000}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o.max() != 1 {
		t.Errorf("two steps of 600 MB ran at once on a budget of 1000 MB")
	}

	f = newFixture(t, recipeText)
	b := newBarrier(2)
	setHook(t, "m1", b.hook)
	setHook(t, "m2", b.hook)
	if _, err := f.engine(Options{Jobs: 2, MaxMemoryMB: 1200}).Run(context.Background()); err != nil {
		t.Fatalf("a budget of 1200 MB: %v", err)
	}

	f = newFixture(t, header+`  huge: {uses: enginetest, needs: [t1], with: {content: h, memory_mb: 5000}}
`)
	if _, err := f.engine(Options{Jobs: 2, MaxMemoryMB: 1000}).Run(context.Background()); err != nil || runs.runs("huge") != 1 {
		t.Errorf("a step over the whole budget: ran %d times, %v", runs.runs("huge"), err)
	}
}

// failRecipe has one failing step, a step that needs it (and one that
// needs that), and an independent step the scheduler would start after
// the failure at -j 1 (it has the shortest chain).
const failRecipe = header + `  bad: {uses: enginetest, with: {content: b, fail: "the tool crashed"}}
  after: {uses: enginetest, needs: [bad], with: {content: a}}
  after2: {uses: enginetest, needs: [after], with: {content: a2}}
  later: {uses: enginetest, with: {content: l}}
`

// Fail-fast: the first failure stops the run; the independent step that
// had not started is reported stopped (not failed, not blamed on a need),
// the steps below the failure skipped because of it.
func TestFailFast(t *testing.T) {
	f := newFixture(t, failRecipe)
	res, err := f.engine(Options{Jobs: 1}).Run(context.Background())
	var se *StepError
	if !errors.As(err, &se) || se.Step != "bad" || !strings.Contains(err.Error(), "the tool crashed") {
		t.Fatalf("err = %v, want bad's failure", err)
	}
	if len(res.Failed) != 1 {
		t.Errorf("root causes %v, want bad's alone", res.Failed)
	}
	if runs.runs("later") != 0 {
		t.Error("fail-fast started an independent step after the failure")
	}
	if res.Stopped["later"] != "bad" {
		t.Errorf("Stopped = %v, want later stopped after bad", res.Stopped)
	}
	for _, id := range []string{"after", "after2"} {
		if _, stopped := res.Stopped[id]; stopped || !slices.Contains(res.Skipped, id) {
			t.Errorf("%s: skipped %v, stopped %v; want skipped for its upstream", id, res.Skipped, res.Stopped)
		}
	}
	wantMsg := map[string]string{
		"later":  "not run (stopped after bad failed)",
		"after":  "skipped (upstream bad failed)",
		"after2": "skipped (upstream bad failed)",
	}
	for id, msg := range wantMsg {
		evs := f.eventsOf(event.Skipped, id)
		if len(evs) != 1 || evs[0].Message != msg {
			t.Errorf("%s: skipped events %+v, want one saying %q", id, evs, msg)
		}
	}
	if evs := f.eventsOf(event.Failed, "bad"); len(evs) != 1 || !strings.Contains(evs[0].Message, "the tool crashed") || evs[0].Path == "" {
		t.Errorf("bad: failed events %+v", evs)
	}
	ents, err := f.cache.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.StepID == "bad" {
			t.Error("a failed step's output was committed to the cache")
		}
	}
}

// Keep-going: independent work finishes after a failure (the target
// publishes); only what needs the failed step is skipped.
func TestKeepGoing(t *testing.T) {
	f := newFixture(t, failRecipe)
	res, err := f.engine(Options{Jobs: 1, KeepGoing: true}).Run(context.Background())
	var se *StepError
	if !errors.As(err, &se) || se.Step != "bad" {
		t.Fatalf("err = %v, want bad's failure", err)
	}
	if runs.runs("later") != 1 || res.Outputs["later"] == nil {
		t.Error("keep-going did not run the independent step")
	}
	if res.Published["t1"] == "" {
		t.Errorf("keep-going did not publish the independent target: %v", res.Published)
	}
	if len(res.Stopped) != 0 {
		t.Errorf("keep-going stopped %v", res.Stopped)
	}
	if want := []string{"after", "after2"}; !slices.Equal(res.Skipped, want) {
		t.Errorf("skipped %v, want %v", res.Skipped, want)
	}
}

// A target that fails its gate is a verdict on that target, not a broken
// run: under fail-fast, work started after it still runs.
func TestGateFailureDoesNotStopTheRun(t *testing.T) {
	// zz sorts after publish:t1, so at -j 1 it starts after the gate.
	f := newFixture(t, header+`  check:t1: {with: {ppl: 30}}
  zz: {uses: enginetest, with: {content: z}}
`)
	res, err := f.engine(Options{Jobs: 1}).Run(context.Background())
	if !publish.IsGateFailure(err) {
		t.Fatalf("err = %v, want the gate's failure", err)
	}
	if g := res.Gates["t1"]; g == nil || g.Verdict != "fail" || g.Converted != 30 {
		t.Errorf("gate %+v", g)
	}
	if runs.runs("zz") != 1 || len(res.Stopped) != 0 {
		t.Errorf("after a failed gate: zz ran %d times, stopped %v", runs.runs("zz"), res.Stopped)
	}
	if _, ok := res.Published["t1"]; ok {
		t.Error("a target that failed its gate was published")
	}
}
