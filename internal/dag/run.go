package dag

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// Options bound how much of the graph runs at once.
type Options struct {
	// Jobs is the most nodes running at once; <= 0 means runtime.NumCPU().
	Jobs int
	// Cores is the total core budget; <= 0 means Jobs. A node asking for
	// more than the budget runs alone rather than never.
	Cores int
	// MemoryMB is the total memory budget; <= 0 means unlimited. A node
	// asking for more than the budget runs alone rather than never.
	MemoryMB int64
	// KeepGoing lets independent branches finish after a failure. When
	// false, the first failure cancels running nodes and nothing else starts.
	KeepGoing bool
	// OnEvent, if set, is called from a single goroutine, one event at a
	// time, in the order things happened. It should not block for long:
	// scheduling waits for it.
	OnEvent func(Event)
}

// A ContainedError fails its node, and so skips what needs that node, but
// does not stop the run under fail-fast: it is a verdict about one branch
// (a quality gate that refused one target), not a sign that the run as a
// whole is broken, so independent branches still finish.
type ContainedError interface {
	error
	Contained() bool
}

func contained(err error) bool {
	var c ContainedError
	return errors.As(err, &c) && c.Contained()
}

// Status is where a node ended up (or is).
type Status string

const (
	Pending Status = "pending"
	Running Status = "running"
	OK      Status = "ok"
	// Failed marks a root cause: the node's own Run returned an error.
	Failed Status = "failed"
	// Skipped nodes never started because a node they need failed (or was
	// skipped), or because fail-fast stopped the run; BlockedBy names the
	// failed node to blame.
	Skipped Status = "skipped"
	// Canceled nodes were stopped (or never started) because the run was
	// interrupted, or were running when fail-fast stopped the run.
	Canceled Status = "canceled"
)

// Result is what happened to one node.
type Result struct {
	ID         string
	Status     Status
	Err        error
	Start, End time.Time // zero when the node never started
	// Cores is what the node was granted when it started (0 if it never
	// started); see Grant. MemoryMB is what it was charged.
	Cores     int
	MemoryMB  int64
	BlockedBy string // for Skipped: the failed node that caused it
	// Stopped marks a Skipped node that needs nothing that failed: it was
	// not started because fail-fast stopped the run after BlockedBy failed.
	Stopped bool
}

// Event types.
const (
	EventStarted  = "started"
	EventFinished = "finished"
)

// Event reports a node starting or reaching its final status. Every node
// gets exactly one "finished" event, including those that never started.
type Event struct {
	Type   string
	ID     string
	Status Status
	Err    error
	Time   time.Time
}

// Error is returned by Run when nodes failed; it lists only root causes.
type Error struct {
	Failed []*Result // in RootCauses order
}

func (e *Error) Error() string {
	if len(e.Failed) == 1 {
		return fmt.Sprintf("%s failed: %v", e.Failed[0].ID, e.Failed[0].Err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d nodes failed:", len(e.Failed))
	for _, r := range e.Failed {
		fmt.Fprintf(&b, "\n  %s: %v", r.ID, r.Err)
	}
	return b.String()
}

// Unwrap exposes the root-cause errors to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, r := range e.Failed {
		errs[i] = r.Err
	}
	return errs
}

// RootCauses returns the failed nodes (not skipped or canceled ones),
// ordered by ID.
func RootCauses(res map[string]*Result) []*Result {
	var out []*Result
	for _, r := range res {
		if r.Status == Failed {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// Run validates the graph and runs it. Every node gets a Result. The error
// is nil when every node is ok, ctx.Err() when ctx was canceled, and an
// *Error naming the root causes otherwise. Run returns only after every
// node it started has returned.
//
// Among nodes that are ready at the same time, the one with the longest
// chain of dependents goes first (it bounds the total time), then the
// smallest ID, so runs are reproducible.
func Run(ctx context.Context, nodes []Node, opt Options) (map[string]*Result, error) {
	g, err := build(nodes)
	if err != nil {
		return nil, err
	}
	s := newScheduler(g, opt)
	return s.run(ctx)
}

type grantKey struct{}

// Grant is the number of cores the scheduler granted the node whose Run
// received ctx: its Cores, or for an elastic node (MinCores) what was free
// when it started. A tool told to use more threads than this oversubscribes
// the cores the scheduler handed to other nodes. 0 outside a Run.
func Grant(ctx context.Context) int {
	n, _ := ctx.Value(grantKey{}).(int)
	return n
}

type completion struct {
	node     int
	err      error
	canceled bool
	end      time.Time
}

type scheduler struct {
	g   *graph
	opt Options

	results []*Result
	unmet   []int // needs not yet ok
	started []bool
	ready   *readyHeap

	running   int
	coresUsed int
	memUsed   int64
	granted   []int   // cores charged to each running node
	memory    []int64 // each node's memory weight once known; -1 before

	done        chan completion
	trigger     int // first failure in fail-fast mode, -1 if none
	interrupted bool
}

func newScheduler(g *graph, opt Options) *scheduler {
	if opt.Jobs <= 0 {
		opt.Jobs = runtime.NumCPU()
	}
	if opt.Cores <= 0 {
		opt.Cores = opt.Jobs
	}
	s := &scheduler{
		g:       g,
		opt:     opt,
		results: make([]*Result, len(g.nodes)),
		unmet:   make([]int, len(g.nodes)),
		started: make([]bool, len(g.nodes)),
		granted: make([]int, len(g.nodes)),
		memory:  make([]int64, len(g.nodes)),
		ready:   &readyHeap{g: g},
		done:    make(chan completion, len(g.nodes)),
		trigger: -1,
	}
	for i := range g.nodes {
		s.results[i] = &Result{ID: g.ids[i], Status: Pending}
		s.memory[i] = -1
		s.unmet[i] = len(g.needs[i])
		if s.unmet[i] == 0 {
			s.ready.items = append(s.ready.items, i)
		}
	}
	heap.Init(s.ready)
	return s
}

func (s *scheduler) run(ctx context.Context) (map[string]*Result, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	parentDone := ctx.Done()
	for {
		if ctx.Err() != nil && !s.interrupted {
			s.interrupted = true
		}
		if !s.interrupted && s.trigger < 0 {
			s.startReady(runCtx)
		}
		if s.running == 0 {
			break
		}
		select {
		case c := <-s.done:
			s.finish(c, cancel)
		case <-parentDone:
			// runCtx is derived from ctx, so running nodes see it too.
			s.interrupted = true
			parentDone = nil
		}
	}
	s.settleUnstarted()

	out := make(map[string]*Result, len(s.results))
	for _, r := range s.results {
		out[r.ID] = r
	}
	if s.interrupted && !allOK(s.results) {
		return out, ctx.Err()
	}
	if failed := RootCauses(out); len(failed) > 0 {
		return out, &Error{Failed: failed}
	}
	return out, nil
}

// startReady starts ready nodes in priority order while the budget allows.
// A node that does not fit now is passed over for smaller ones, except an
// oversized node: everything waits for it so it is not starved.
//
// Elastic nodes are first admitted with their minimum, so that every ready
// node that fits starts now rather than one taking every free core while
// the next waits; the cores still free are then handed out in priority
// order up to each node's maximum. A grant is fixed for the node's life
// (a tool's thread count cannot change once it runs).
func (s *scheduler) startReady(ctx context.Context) {
	var passed, admit []int
	free := s.opt.Cores - s.coresUsed
	// Every node takes at least one core, so a full core budget ends the scan.
	for s.ready.Len() > 0 && s.running+len(admit) < s.opt.Jobs && free > 0 {
		n := heap.Pop(s.ready).(int)
		lo, _, mem := s.weights(n)
		// An oversized node starts only on an idle machine; once it runs, its
		// weight alone exceeds the budget, so nothing starts next to it.
		if s.oversized(lo, mem) {
			if s.running > 0 || len(admit) > 0 {
				passed = append(passed, n)
				break
			}
		} else if lo > free || (s.opt.MemoryMB > 0 && s.memUsed+mem > s.opt.MemoryMB) {
			passed = append(passed, n)
			continue
		}
		admit = append(admit, n)
		s.granted[n] = lo
		s.memUsed += mem
		free -= lo
	}
	for _, n := range admit {
		_, hi, _ := s.weights(n)
		if extra := min(hi-s.granted[n], free); extra > 0 {
			s.granted[n] += extra
			free -= extra
		}
	}
	for _, n := range admit {
		s.start(ctx, n)
	}
	for _, n := range passed {
		heap.Push(s.ready, n)
	}
}

// weights are a node's least and most cores and its memory.
func (s *scheduler) weights(n int) (lo, hi int, mem int64) {
	node := &s.g.nodes[n]
	hi = max(node.Cores, 1)
	lo = hi
	if node.MinCores > 0 && node.MinCores < hi {
		lo = node.MinCores
	}
	if s.memory[n] < 0 {
		s.memory[n] = node.MemoryMB
		if node.Memory != nil {
			s.memory[n] = max(node.Memory(), 0)
		}
	}
	return lo, hi, s.memory[n]
}

func (s *scheduler) oversized(cores int, mem int64) bool {
	return cores > s.opt.Cores || (s.opt.MemoryMB > 0 && mem > s.opt.MemoryMB)
}

// start runs node n with the cores granted to it (its memory is already
// charged by startReady).
func (s *scheduler) start(ctx context.Context, n int) {
	s.running++
	s.coresUsed += s.granted[n]
	s.started[n] = true
	r := s.results[n]
	r.Status = Running
	r.Start = time.Now()
	r.Cores = s.granted[n]
	r.MemoryMB = s.memory[n]
	s.emit(Event{Type: EventStarted, ID: r.ID, Status: Running, Time: r.Start})

	run := s.g.nodes[n].Run
	ctx = context.WithValue(ctx, grantKey{}, s.granted[n])
	go func() {
		err := runNode(ctx, run)
		s.done <- completion{
			node: n,
			err:  err,
			// Decided here, not in the scheduler, so that a node failing on
			// its own just before a cancellation still counts as failed.
			canceled: err != nil && ctx.Err() != nil,
			end:      time.Now(),
		}
	}()
}

func runNode(ctx context.Context, run func(context.Context) error) (err error) {
	if run == nil {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return run(ctx)
}

func (s *scheduler) finish(c completion, cancel context.CancelFunc) {
	n := c.node
	_, _, mem := s.weights(n)
	s.running--
	s.coresUsed -= s.granted[n]
	s.memUsed -= mem

	r := s.results[n]
	r.End = c.end
	r.Err = c.err
	switch {
	case c.err == nil:
		r.Status = OK
		for _, d := range s.g.dependents[n] {
			if s.unmet[d]--; s.unmet[d] == 0 {
				heap.Push(s.ready, d)
			}
		}
	case c.canceled:
		r.Status = Canceled
	default:
		r.Status = Failed
		if !s.opt.KeepGoing && s.trigger < 0 && !contained(c.err) {
			s.trigger = n
			cancel()
		}
	}
	s.emit(Event{Type: EventFinished, ID: r.ID, Status: r.Status, Err: r.Err, Time: r.End})
}

// settleUnstarted gives every node that never started its final status, in
// topological order so that blame flows from needs to dependents. When
// several failures block a node, the smallest failed ID is blamed, which
// keeps keep-going output reproducible.
func (s *scheduler) settleUnstarted() {
	now := time.Now()
	for _, n := range s.g.topo {
		if s.started[n] {
			continue
		}
		r := s.results[n]
		blame := ""
		for _, m := range s.g.needs[n] {
			cause := ""
			switch need := s.results[m]; need.Status {
			case Failed:
				cause = need.ID
			case Skipped:
				if !need.Stopped {
					cause = need.BlockedBy
				}
			}
			if cause != "" && (blame == "" || cause < blame) {
				blame = cause
			}
		}
		switch {
		case blame != "":
			r.Status, r.BlockedBy = Skipped, blame
		case s.interrupted:
			r.Status = Canceled
		case s.trigger >= 0:
			r.Status, r.BlockedBy, r.Stopped = Skipped, s.g.ids[s.trigger], true
		default:
			// Unreachable: with nothing failed or interrupted, every node
			// becomes ready and the loop only ends when it has run.
			panic(fmt.Sprintf("dag: node %q never started and nothing blocked it", r.ID))
		}
		s.emit(Event{Type: EventFinished, ID: r.ID, Status: r.Status, Time: now})
	}
}

func allOK(results []*Result) bool {
	for _, r := range results {
		if r.Status != OK {
			return false
		}
	}
	return true
}

func (s *scheduler) emit(e Event) {
	if s.opt.OnEvent != nil {
		s.opt.OnEvent(e)
	}
}

// readyHeap pops the node with the longest chain of dependents first, then
// the smallest ID.
type readyHeap struct {
	g     *graph
	items []int
}

func (h *readyHeap) Len() int { return len(h.items) }
func (h *readyHeap) Less(a, b int) bool {
	x, y := h.items[a], h.items[b]
	if px, py := h.g.priority[x], h.g.priority[y]; px != py {
		return px > py
	}
	return h.g.ids[x] < h.g.ids[y]
}
func (h *readyHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *readyHeap) Push(x any)    { h.items = append(h.items, x.(int)) }
func (h *readyHeap) Pop() any {
	n := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return n
}
