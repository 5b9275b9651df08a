package dag

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// liveness bounds how long a test waits for something that must happen;
// hitting it means a hang, not a slow machine.
const liveness = 30 * time.Second

func noop(context.Context) error { return nil }

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		want  []string // substrings of the error; none means valid
	}{
		{"ok", []Node{{ID: "a"}, {ID: "b", Needs: []string{"a", "a"}}}, nil},
		{"duplicate", []Node{{ID: "a"}, {ID: "a"}}, []string{`duplicate node ID "a"`}},
		{"unknown need", []Node{{ID: "a", Needs: []string{"b"}}}, []string{`node "a" needs unknown node "b"`}},
		{"all problems at once",
			[]Node{{ID: "a", Needs: []string{"x"}}, {ID: "a"}, {ID: ""}, {ID: "m", MemoryMB: -1}},
			[]string{`needs unknown node "x"`, `duplicate node ID "a"`, "empty ID", "memory must not be negative"}},
		{"self cycle", []Node{{ID: "a", Needs: []string{"a"}}}, []string{"dependency cycle: a -> a"}},
		{"cycle in data-flow order",
			// b needs a, c needs b, a needs c: data flows a -> b -> c -> a.
			[]Node{{ID: "c", Needs: []string{"b"}}, {ID: "a", Needs: []string{"c"}}, {ID: "b", Needs: []string{"a"}}, {ID: "d", Needs: []string{"c"}}},
			[]string{"dependency cycle: a -> b -> c -> a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.nodes)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted an invalid graph")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCycleErrorPath(t *testing.T) {
	// A cycle reachable only through a node that is not on it.
	nodes := []Node{
		{ID: "start"},
		{ID: "x", Needs: []string{"start", "z"}},
		{ID: "y", Needs: []string{"x"}},
		{ID: "z", Needs: []string{"y"}},
	}
	var cyc *CycleError
	if err := Validate(nodes); !errors.As(err, &cyc) {
		t.Fatalf("Validate = %v, want *CycleError", err)
	}
	if got := strings.Join(cyc.Path, " "); got != "x y z x" {
		t.Errorf("cycle path = %q, want %q", got, "x y z x")
	}
	if _, err := Run(context.Background(), nodes, Options{}); !errors.As(err, &cyc) {
		t.Errorf("Run = %v, want *CycleError before running anything", err)
	}
}

func TestTopoOrder(t *testing.T) {
	got, err := TopoOrder([]Node{
		{ID: "quantize", Needs: []string{"convert"}},
		{ID: "convert", Needs: []string{"download"}},
		{ID: "download"},
		{ID: "baseline", Needs: []string{"download"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(got, " "); s != "download baseline convert quantize" {
		t.Errorf("TopoOrder = %s", s)
	}
}

// TestNeedsFinishFirst runs a wide, deep graph and checks from inside each
// node that everything it needs has already finished.
func TestNeedsFinishFirst(t *testing.T) {
	var mu sync.Mutex
	finished := map[string]bool{}
	var nodes []Node
	for i := range 200 {
		id := fmt.Sprintf("n%03d", i)
		var needs []string
		for _, j := range []int{i - 1, i - 7, i / 2} {
			if j >= 0 && j < i {
				needs = append(needs, fmt.Sprintf("n%03d", j))
			}
		}
		nodes = append(nodes, Node{ID: id, Needs: needs, Run: func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			for _, n := range needs {
				if !finished[n] {
					return fmt.Errorf("%s started before its need %s finished", id, n)
				}
			}
			finished[id] = true
			return nil
		}})
	}
	res, err := Run(context.Background(), nodes, Options{Jobs: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if r := res[n.ID]; r.Status != OK || r.Start.IsZero() || r.End.Before(r.Start) {
			t.Errorf("%s: %+v", n.ID, r)
		}
	}
}

// TestJobsBound holds every node inside Run until the test releases it, so
// the scheduler has every chance to overrun the bound, and checks both that
// the bound holds and that it is reached.
func TestJobsBound(t *testing.T) {
	const jobs, total = 3, 20
	var cur, peak atomic.Int32
	started := make(chan string)
	release := make(chan struct{})
	var nodes []Node
	for i := range total {
		nodes = append(nodes, Node{ID: fmt.Sprintf("n%02d", i), Run: func(ctx context.Context) error {
			n := cur.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			started <- "x"
			<-release
			cur.Add(-1)
			return nil
		}})
	}
	eventPeak, running := 0, 0
	// A core budget far above Jobs, so that only Jobs can be the limit.
	opt := Options{Jobs: jobs, Cores: 100, OnEvent: func(e Event) {
		switch e.Type {
		case EventStarted:
			running++
			eventPeak = max(eventPeak, running)
		case EventFinished:
			running--
		}
	}}
	type out struct {
		res map[string]*Result
		err error
	}
	result := make(chan out, 1)
	go func() {
		res, err := Run(context.Background(), nodes, opt)
		result <- out{res, err}
	}()
	inFlight := 0
	for s := 0; s < total; {
		select {
		case <-started:
			s++
			inFlight++
		case <-time.After(liveness):
			t.Fatalf("only %d of %d nodes started", s, total)
		}
		// Release one only when the pool is full (or nothing else will start).
		if inFlight == jobs || s == total {
			release <- struct{}{}
			inFlight--
		}
	}
	for ; inFlight > 0; inFlight-- {
		release <- struct{}{}
	}
	o := <-result
	if o.err != nil {
		t.Fatal(o.err)
	}
	if p := peak.Load(); p != jobs {
		t.Errorf("peak concurrency inside Run = %d, want %d", p, jobs)
	}
	if eventPeak != jobs {
		t.Errorf("peak concurrency by events = %d, want %d", eventPeak, jobs)
	}
}

// resourceWatch tracks, from events, what the scheduler believes is running
// and records any moment a budget is exceeded.
type resourceWatch struct {
	nodes      map[string]Node
	running    map[string]bool
	violations []string
	peak       int
}

func newResourceWatch(nodes []Node) *resourceWatch {
	w := &resourceWatch{nodes: map[string]Node{}, running: map[string]bool{}}
	for _, n := range nodes {
		w.nodes[n.ID] = n
	}
	return w
}

func (w *resourceWatch) onEvent(opt Options) func(Event) {
	return func(e Event) {
		if e.Type == EventFinished {
			delete(w.running, e.ID)
			return
		}
		w.running[e.ID] = true
		w.peak = max(w.peak, len(w.running))
		cores, mem := 0, int64(0)
		for id := range w.running {
			cores += max(w.nodes[id].Cores, 1)
			mem += w.nodes[id].MemoryMB
		}
		alone := len(w.running) == 1
		if cores > opt.Cores && !alone {
			w.violations = append(w.violations, fmt.Sprintf("%s started: %d cores in use > %d", e.ID, cores, opt.Cores))
		}
		if opt.MemoryMB > 0 && mem > opt.MemoryMB && !alone {
			w.violations = append(w.violations, fmt.Sprintf("%s started: %d MB in use > %d", e.ID, mem, opt.MemoryMB))
		}
	}
}

func TestMemoryBudget(t *testing.T) {
	// Two 10 GB steps on a 16 GB budget must take turns, while small steps
	// still run next to them.
	var bigRunning, bigPeak atomic.Int32
	big := func(ctx context.Context) error {
		n := bigRunning.Add(1)
		defer bigRunning.Add(-1)
		for p := bigPeak.Load(); n > p && !bigPeak.CompareAndSwap(p, n); p = bigPeak.Load() {
		}
		time.Sleep(5 * time.Millisecond) // widen the window for an overlap
		return nil
	}
	nodes := []Node{
		{ID: "quantize-q4", MemoryMB: 10_000, Run: big},
		{ID: "quantize-q8", MemoryMB: 10_000, Run: big},
		{ID: "hash", MemoryMB: 100, Run: noop},
		{ID: "fetch", Run: noop},
	}
	opt := Options{Jobs: 4, Cores: 4, MemoryMB: 16_000}
	w := newResourceWatch(nodes)
	opt.OnEvent = w.onEvent(opt)
	if _, err := Run(context.Background(), nodes, opt); err != nil {
		t.Fatal(err)
	}
	if len(w.violations) > 0 {
		t.Errorf("budget exceeded:\n%s", strings.Join(w.violations, "\n"))
	}
	if p := bigPeak.Load(); p != 1 {
		t.Errorf("big nodes overlapped: peak %d", p)
	}
	if w.peak < 2 {
		t.Errorf("small nodes never ran next to a big one (peak %d)", w.peak)
	}
}

func TestCoreBudget(t *testing.T) {
	var nodes []Node
	for i := range 6 {
		nodes = append(nodes, Node{ID: fmt.Sprintf("c%d", i), Cores: 2, Run: noop})
	}
	opt := Options{Jobs: 8, Cores: 5}
	w := newResourceWatch(nodes)
	opt.OnEvent = w.onEvent(opt)
	if _, err := Run(context.Background(), nodes, opt); err != nil {
		t.Fatal(err)
	}
	if len(w.violations) > 0 {
		t.Errorf("budget exceeded:\n%s", strings.Join(w.violations, "\n"))
	}
	if w.peak != 2 {
		t.Errorf("peak = %d, want 2 (two 2-core nodes fit in 5 cores)", w.peak)
	}
}

// TestOversizedRunsAlone: a node bigger than the whole budget runs, and
// nothing runs next to it.
func TestOversizedRunsAlone(t *testing.T) {
	nodes := []Node{
		{ID: "huge-mem", MemoryMB: 64_000, Run: noop},
		{ID: "huge-cpu", Cores: 32, Run: noop},
		{ID: "a", Run: noop},
		{ID: "b", Run: noop},
		{ID: "c", Needs: []string{"huge-mem"}, Run: noop},
	}
	opt := Options{Jobs: 4, Cores: 4, MemoryMB: 16_000}
	var running []string
	var violations []string
	opt.OnEvent = func(e Event) {
		if e.Type == EventFinished {
			for i, id := range running {
				if id == e.ID {
					running = append(running[:i], running[i+1:]...)
					break
				}
			}
			return
		}
		running = append(running, e.ID)
		if len(running) > 1 {
			for _, id := range running {
				if strings.HasPrefix(id, "huge") {
					violations = append(violations, strings.Join(running, "+"))
				}
			}
		}
	}
	res, err := Run(context.Background(), nodes, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(violations) > 0 {
		t.Errorf("oversized node shared the machine: %v", violations)
	}
	for id, r := range res {
		if r.Status != OK {
			t.Errorf("%s: %s", id, r.Status)
		}
	}
}

// TestOversizedNotStarved: once an oversized node is the most urgent ready
// node, smaller ones stop jumping ahead of it, or it might wait for the
// machine to go idle until the very end.
func TestOversizedNotStarved(t *testing.T) {
	nodes := []Node{
		{ID: "r", Run: noop},
		{ID: "r2", Needs: []string{"r"}, Run: noop},
		{ID: "r3", Needs: []string{"r2"}, Run: noop},
		{ID: "huge", MemoryMB: 64_000, Run: noop},
		{ID: "huge-after", Needs: []string{"huge"}, Run: noop},
		{ID: "s1", Run: noop},
		{ID: "s2", Run: noop},
	}
	var order []string
	opt := Options{Jobs: 2, MemoryMB: 16_000, OnEvent: func(e Event) {
		if e.Type == EventStarted {
			order = append(order, e.ID)
		}
	}}
	if _, err := Run(context.Background(), nodes, opt); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order[:2], " "); got != "r huge" {
		t.Errorf("start order %v, want r then huge", order)
	}
}

func TestPriorityOrder(t *testing.T) {
	// With one job, the longest chain goes first, then smallest ID.
	nodes := []Node{
		{ID: "a", Run: noop},
		{ID: "z1", Run: noop},
		{ID: "z2", Needs: []string{"z1"}, Run: noop},
		{ID: "z3", Needs: []string{"z2"}, Run: noop},
	}
	var order []string
	opt := Options{Jobs: 1, OnEvent: func(e Event) {
		if e.Type == EventStarted {
			order = append(order, e.ID)
		}
	}}
	if _, err := Run(context.Background(), nodes, opt); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, " "); got != "z1 z2 a z3" {
		t.Errorf("start order = %s, want z1 z2 a z3", got)
	}
}

var errBoom = errors.New("boom")

func fail(context.Context) error { return errBoom }

func TestKeepGoing(t *testing.T) {
	nodes := []Node{
		{ID: "convert", Run: fail},
		{ID: "quantize", Needs: []string{"convert"}, Run: noop},
		{ID: "publish", Needs: []string{"quantize", "other"}, Run: noop},
		{ID: "other", Run: noop},
		{ID: "other-eval", Needs: []string{"other"}, Run: noop},
		{ID: "f2", Run: fail},
		{ID: "join", Needs: []string{"quantize", "f2"}, Run: noop},
	}
	var finished []string
	res, err := Run(context.Background(), nodes, Options{Jobs: 2, KeepGoing: true, OnEvent: func(e Event) {
		if e.Type == EventFinished {
			finished = append(finished, e.ID)
		}
	}})
	var runErr *Error
	if !errors.As(err, &runErr) || !errors.Is(err, errBoom) {
		t.Fatalf("Run error = %v, want *Error wrapping the node error", err)
	}
	want := map[string]struct {
		status  Status
		blocked string
	}{
		"convert":    {Failed, ""},
		"quantize":   {Skipped, "convert"},
		"publish":    {Skipped, "convert"},
		"other":      {OK, ""},
		"other-eval": {OK, ""},
		"f2":         {Failed, ""},
		// Blocked by both failures: the smallest ID is blamed.
		"join": {Skipped, "convert"},
	}
	for id, w := range want {
		if r := res[id]; r.Status != w.status || r.BlockedBy != w.blocked {
			t.Errorf("%s: status %s blocked by %q, want %s blocked by %q", id, r.Status, r.BlockedBy, w.status, w.blocked)
		}
	}
	var roots []string
	for _, r := range RootCauses(res) {
		roots = append(roots, r.ID)
	}
	if got := strings.Join(roots, " "); got != "convert f2" {
		t.Errorf("root causes = %s, want convert f2", got)
	}
	if msg := err.Error(); !strings.Contains(msg, "2 nodes failed") || !strings.Contains(msg, "convert: boom") {
		t.Errorf("error message = %q", msg)
	}
	if len(finished) != len(nodes) {
		t.Errorf("got %d finished events for %d nodes: %v", len(finished), len(nodes), finished)
	}
}

// blockUntilCanceled stands in for a long step that honours cancellation.
func blockUntilCanceled(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(liveness):
		return errors.New("never canceled")
	}
}

func TestFailFast(t *testing.T) {
	started := make(chan struct{})
	nodes := []Node{
		// "long" has the longest chain, so it starts first; "bad" starts
		// next and fails once "long" is running.
		{ID: "long", Run: func(ctx context.Context) error {
			close(started)
			return blockUntilCanceled(ctx)
		}},
		{ID: "after-long", Needs: []string{"long"}, Run: noop},
		{ID: "after-after-long", Needs: []string{"after-long"}, Run: noop},
		{ID: "bad", Run: func(context.Context) error {
			<-started
			return errBoom
		}},
		{ID: "zz-later", Run: noop},
		{ID: "after-bad", Needs: []string{"bad"}, Run: noop},
		{ID: "after-later", Needs: []string{"zz-later"}, Run: noop},
	}
	var startedIDs []string
	res, err := Run(context.Background(), nodes, Options{Jobs: 2, OnEvent: func(e Event) {
		if e.Type == EventStarted {
			startedIDs = append(startedIDs, e.ID)
		}
	}})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Run error = %v, want the root cause", err)
	}
	want := map[string]struct {
		status  Status
		blocked string
		// stopped: not started because fail-fast stopped the run, though
		// nothing it needs failed.
		stopped bool
	}{
		"long":             {Canceled, "", false},
		"after-long":       {Skipped, "bad", true},
		"after-after-long": {Skipped, "bad", true},
		"bad":              {Failed, "", false},
		"zz-later":         {Skipped, "bad", true},
		"after-bad":        {Skipped, "bad", false},
		"after-later":      {Skipped, "bad", true},
	}
	for id, w := range want {
		if r := res[id]; r.Status != w.status || r.BlockedBy != w.blocked || r.Stopped != w.stopped {
			t.Errorf("%s: status %s blocked by %q stopped %v, want %s blocked by %q stopped %v", id, r.Status, r.BlockedBy, r.Stopped, w.status, w.blocked, w.stopped)
		}
	}
	if got := strings.Join(startedIDs, " "); got != "long bad" {
		t.Errorf("started %s, want only long and bad", got)
	}
	if roots := RootCauses(res); len(roots) != 1 || roots[0].ID != "bad" {
		t.Errorf("root causes = %v, want only bad", roots)
	}
}

func TestParentCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodes := []Node{
		{ID: "a", Run: func(ctx context.Context) error {
			cancel() // Ctrl-C arrives while a runs
			return blockUntilCanceled(ctx)
		}},
		{ID: "b", Needs: []string{"a"}, Run: noop},
		{ID: "c", Run: noop}, // lower priority; the single job slot is a's
	}
	var startedIDs []string
	res, err := Run(ctx, nodes, Options{Jobs: 1, KeepGoing: true, OnEvent: func(e Event) {
		if e.Type == EventStarted {
			startedIDs = append(startedIDs, e.ID)
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run error = %v, want context.Canceled", err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if res[id].Status != Canceled {
			t.Errorf("%s: %s, want canceled", id, res[id].Status)
		}
	}
	if got := strings.Join(startedIDs, " "); got != "a" {
		t.Errorf("started %s after cancel", got)
	}
	if len(RootCauses(res)) != 0 {
		t.Errorf("cancellation reported as a failure: %v", RootCauses(res))
	}
}

func TestAlreadyCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	res, err := Run(ctx, []Node{{ID: "a", Run: func(context.Context) error { ran = true; return nil }}}, Options{})
	if !errors.Is(err, context.Canceled) || ran || res["a"].Status != Canceled {
		t.Errorf("err=%v ran=%v status=%s", err, ran, res["a"].Status)
	}
}

func TestPanicIsFailure(t *testing.T) {
	res, err := Run(context.Background(), []Node{{ID: "p", Run: func(context.Context) error { panic("kaboom") }}}, Options{})
	if err == nil || res["p"].Status != Failed || !strings.Contains(res["p"].Err.Error(), "panic: kaboom") {
		t.Errorf("err=%v result=%+v", err, res["p"])
	}
}

// TestEventsSerial relies on -race: OnEvent appends without a lock.
func TestEventsSerial(t *testing.T) {
	nodes := make([]Node, 100)
	for i := range nodes {
		nodes[i] = Node{ID: fmt.Sprint(i), Run: noop}
	}
	var events []Event
	if _, err := Run(context.Background(), nodes, Options{Jobs: 16, OnEvent: func(e Event) { events = append(events, e) }}); err != nil {
		t.Fatal(err)
	}
	if len(events) != 2*len(nodes) {
		t.Errorf("%d events for %d nodes", len(events), len(nodes))
	}
}

func noopGraph(n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		var needs []string
		if i > 0 {
			needs = append(needs, fmt.Sprintf("step-%04d", i-1))
		}
		if i >= 10 {
			needs = append(needs, fmt.Sprintf("step-%04d", i-10))
		}
		if i%3 == 0 && i >= 3 {
			// some width, too
			needs = []string{fmt.Sprintf("step-%04d", i/3)}
		}
		nodes[i] = Node{ID: fmt.Sprintf("step-%04d", i), Needs: needs, Run: noop}
	}
	return nodes
}

func TestNoop1000(t *testing.T) {
	res, err := Run(context.Background(), noopGraph(1000), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1000 {
		t.Fatalf("%d results", len(res))
	}
}

func BenchmarkNoop1000(b *testing.B) {
	nodes := noopGraph(1000)
	for b.Loop() {
		if _, err := Run(context.Background(), nodes, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
