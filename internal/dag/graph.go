// Package dag runs a graph of interdependent nodes with bounded parallelism
// and resource budgets. It knows nothing about what the nodes do: callers
// (the pipeline executor) wrap their work in Node.Run.
package dag

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Node is one unit of work in the graph.
type Node struct {
	ID    string
	Needs []string // IDs that must finish "ok" before this node starts
	// Cores is the node's share of the core budget; 0 means 1. With
	// MinCores set it is the most the node can use.
	Cores int
	// MinCores, when set and under Cores, makes the node elastic: it starts
	// as soon as MinCores are free and is granted up to Cores of what is
	// free then (Grant tells its Run how many). 0 means Cores.
	MinCores int
	// MemoryMB is the node's share of the memory budget; 0 means negligible.
	MemoryMB int64
	// Memory, when set, replaces MemoryMB: it is asked once, when the
	// node's needs are done and it is first considered for starting, so a
	// weight can depend on what they made (the model's size).
	Memory func() int64
	// Estimate is how long the node is expected to run (the last run of
	// the same step, say); 0 means unknown, counted as UnknownEstimate.
	// Ready nodes start longest remaining path first, so a long step is
	// not left to start last.
	Estimate time.Duration
	// Run does the work. It must return promptly once ctx is canceled.
	// A nil Run is a no-op, which is handy for grouping nodes.
	Run func(ctx context.Context) error
}

// UnknownEstimate stands in for a node's Estimate when it has none: with no
// estimates at all, priority is the number of nodes on the longest chain.
const UnknownEstimate = time.Second

func (n *Node) estimate() time.Duration {
	if n.Estimate > 0 {
		return n.Estimate
	}
	return UnknownEstimate
}

// CycleError reports a dependency cycle. Path is in data-flow order (an
// edge a -> b means b needs a), starts at the cycle's smallest ID and
// repeats it at the end: a -> b -> c -> a.
type CycleError struct {
	Path []string
}

func (e *CycleError) Error() string {
	return "dependency cycle: " + strings.Join(e.Path, " -> ")
}

// graph is the validated, index-based form of a node list.
type graph struct {
	nodes      []Node
	ids        []string
	index      map[string]int
	needs      [][]int // deduplicated
	dependents [][]int
	topo       []int           // dependencies before dependents; smallest ID first among equals
	priority   []time.Duration // longest path (by Estimate) from this node to a sink
}

// Validate checks that IDs are unique and non-empty, every need names a
// node, weights are not negative, and there is no cycle. Problems other
// than cycles are all reported (errors.Join); a cycle is reported as a
// *CycleError once the rest is clean.
func Validate(nodes []Node) error {
	_, err := build(nodes)
	return err
}

// TopoOrder returns the node IDs with every node after all of its needs,
// choosing the smallest ID whenever several are possible, so the order is
// stable for printing plans.
func TopoOrder(nodes []Node) ([]string, error) {
	g, err := build(nodes)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(g.topo))
	for i, n := range g.topo {
		out[i] = g.ids[n]
	}
	return out, nil
}

func build(nodes []Node) (*graph, error) {
	g := &graph{
		nodes:      nodes,
		ids:        make([]string, len(nodes)),
		index:      make(map[string]int, len(nodes)),
		needs:      make([][]int, len(nodes)),
		dependents: make([][]int, len(nodes)),
	}
	var errs []error
	for i, n := range nodes {
		g.ids[i] = n.ID
		switch {
		case n.ID == "":
			errs = append(errs, fmt.Errorf("node #%d has an empty ID", i+1))
			continue
		case n.Cores < 0 || n.MinCores < 0:
			errs = append(errs, fmt.Errorf("node %q: cores must not be negative, got %d (least %d)", n.ID, n.Cores, n.MinCores))
		case n.MemoryMB < 0:
			errs = append(errs, fmt.Errorf("node %q: memory must not be negative, got %d MB", n.ID, n.MemoryMB))
		}
		if _, dup := g.index[n.ID]; dup {
			errs = append(errs, fmt.Errorf("duplicate node ID %q", n.ID))
			continue
		}
		g.index[n.ID] = i
	}
	for i, n := range nodes {
		seen := make(map[int]bool, len(n.Needs))
		for _, need := range n.Needs {
			j, ok := g.index[need]
			if !ok {
				errs = append(errs, fmt.Errorf("node %q needs unknown node %q", n.ID, need))
				continue
			}
			if seen[j] {
				continue
			}
			seen[j] = true
			g.needs[i] = append(g.needs[i], j)
			g.dependents[j] = append(g.dependents[j], i)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := g.sort(); err != nil {
		return nil, err
	}
	g.priority = make([]time.Duration, len(nodes))
	for k := len(g.topo) - 1; k >= 0; k-- {
		n := g.topo[k]
		var longest time.Duration
		for _, d := range g.dependents[n] {
			longest = max(longest, g.priority[d])
		}
		g.priority[n] = longest + g.nodes[n].estimate()
	}
	return g, nil
}

// sort fills g.topo with Kahn's algorithm, or returns the cycle that stops it.
func (g *graph) sort() error {
	unmet := make([]int, len(g.nodes))
	ready := &idHeap{ids: g.ids}
	for i := range g.nodes {
		unmet[i] = len(g.needs[i])
		if unmet[i] == 0 {
			ready.items = append(ready.items, i)
		}
	}
	heap.Init(ready)
	g.topo = make([]int, 0, len(g.nodes))
	for ready.Len() > 0 {
		n := heap.Pop(ready).(int)
		g.topo = append(g.topo, n)
		for _, d := range g.dependents[n] {
			if unmet[d]--; unmet[d] == 0 {
				heap.Push(ready, d)
			}
		}
	}
	if len(g.topo) == len(g.nodes) {
		return nil
	}
	return &CycleError{Path: g.findCycle(unmet)}
}

// findCycle walks needs among the nodes Kahn's algorithm could not place.
// Each of them has at least one unplaced need, so the walk must revisit a
// node, and the loop it closes is a cycle.
func (g *graph) findCycle(unmet []int) []string {
	start := -1
	for i := range g.nodes {
		if unmet[i] > 0 && (start < 0 || g.ids[i] < g.ids[start]) {
			start = i
		}
	}
	pos := map[int]int{}
	var walk []int
	for n := start; ; {
		if p, seen := pos[n]; seen {
			walk = walk[p:]
			break
		}
		pos[n] = len(walk)
		walk = append(walk, n)
		next := -1
		for _, m := range g.needs[n] {
			if unmet[m] > 0 && (next < 0 || g.ids[m] < g.ids[next]) {
				next = m
			}
		}
		n = next
	}
	// walk follows needs (x0 needs x1 ...); reverse it into data-flow order
	// and rotate it to start at the smallest ID.
	k := len(walk)
	flow := make([]string, k)
	for i, n := range walk {
		flow[k-1-i] = g.ids[n]
	}
	first := 0
	for i := range flow {
		if flow[i] < flow[first] {
			first = i
		}
	}
	path := append(flow[first:], flow[:first]...)
	return append(path, path[0])
}

// idHeap pops the smallest ID first.
type idHeap struct {
	ids   []string
	items []int
}

func (h *idHeap) Len() int           { return len(h.items) }
func (h *idHeap) Less(a, b int) bool { return h.ids[h.items[a]] < h.ids[h.items[b]] }
func (h *idHeap) Swap(a, b int)      { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *idHeap) Push(x any)         { h.items = append(h.items, x.(int)) }
func (h *idHeap) Pop() any {
	n := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return n
}
