package dag

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// grants runs nodes under opt and returns what each Run was told by Grant,
// checking that it matches the Result.
func grants(t *testing.T, nodes []Node, opt Options) map[string]int {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	for i := range nodes {
		run := nodes[i].Run
		id := nodes[i].ID
		nodes[i].Run = func(ctx context.Context) error {
			mu.Lock()
			got[id] = Grant(ctx)
			mu.Unlock()
			if run != nil {
				return run(ctx)
			}
			return nil
		}
	}
	res, err := Run(context.Background(), nodes, opt)
	if err != nil {
		t.Fatal(err)
	}
	for id, r := range res {
		if r.Cores != got[id] {
			t.Errorf("%s: Result.Cores = %d but Grant said %d", id, r.Cores, got[id])
		}
	}
	return got
}

func TestElasticAloneGetsItsMaximum(t *testing.T) {
	got := grants(t, []Node{{ID: "a", Cores: 4, MinCores: 1}}, Options{Jobs: 2})
	if got["a"] != 2 {
		t.Fatalf("an elastic node alone on 2 cores was granted %d", got["a"])
	}
}

func TestRigidNodeIsGrantedItsCores(t *testing.T) {
	got := grants(t, []Node{{ID: "a", Cores: 2}, {ID: "b"}}, Options{Jobs: 4})
	if got["a"] != 2 || got["b"] != 1 {
		t.Fatalf("grants = %v, want a:2 b:1", got)
	}
}

// Two elastic nodes ready together on two cores both start, one core each,
// instead of the first taking both while the second waits.
func TestElasticNodesShareFreeCores(t *testing.T) {
	both := make(chan struct{})
	var once sync.Once
	var arrived sync.WaitGroup
	arrived.Add(2)
	wait := func(ctx context.Context) error {
		arrived.Done()
		go once.Do(func() { arrived.Wait(); close(both) })
		select {
		case <-both:
			return nil
		case <-time.After(liveness):
			return errBoom // they never ran together
		}
	}
	got := grants(t, []Node{
		{ID: "a", Cores: 2, MinCores: 1, Run: wait},
		{ID: "b", Cores: 2, MinCores: 1, Run: wait},
	}, Options{Jobs: 2})
	if got["a"] != 1 || got["b"] != 1 {
		t.Fatalf("grants = %v, want one core each", got)
	}
}

// A long single-core node leaves one of two cores free: an elastic node
// that could use two starts beside it with one (the issue-18 AWQ case)
// rather than waiting for both.
func TestElasticRunsBesideALongNode(t *testing.T) {
	release := make(chan struct{})
	long := func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-time.After(liveness):
			return errBoom
		}
	}
	got := grants(t, []Node{
		{ID: "awq", Cores: 1, Run: long},
		{ID: "convert", Cores: 2, MinCores: 1, Run: func(context.Context) error { close(release); return nil }},
		{ID: "after", Cores: 2, MinCores: 1, Needs: []string{"awq", "convert"}},
	}, Options{Jobs: 2})
	if got["awq"] != 1 || got["convert"] != 1 || got["after"] != 2 {
		t.Fatalf("grants = %v, want awq:1 convert:1 after:2", got)
	}
}

// Leftover cores go to the higher-priority node (the longer chain).
func TestElasticExtraCoresByPriority(t *testing.T) {
	got := grants(t, []Node{
		{ID: "head", Cores: 3, MinCores: 1},
		{ID: "tail", Needs: []string{"head"}},
		{ID: "leaf", Cores: 3, MinCores: 1},
	}, Options{Jobs: 4, Cores: 3})
	if got["head"] != 2 || got["leaf"] != 1 {
		t.Fatalf("grants = %v, want head:2 leaf:1", got)
	}
}

// An elastic node whose minimum exceeds the budget runs alone, granted its
// minimum.
func TestElasticOversizedMinimum(t *testing.T) {
	got := grants(t, []Node{{ID: "a", Cores: 8, MinCores: 4}, {ID: "b"}}, Options{Jobs: 2})
	if got["a"] != 4 {
		t.Fatalf("grants = %v, want a:4", got)
	}
}

// A node known to be long starts before a chain of short ones, which
// counted in nodes would be longer (the last run's durations say which).
func TestEstimateOrdersReadyNodes(t *testing.T) {
	var mu sync.Mutex
	var order []string
	rec := func(id string) func(context.Context) error {
		return func(context.Context) error {
			mu.Lock()
			order = append(order, id)
			mu.Unlock()
			return nil
		}
	}
	nodes := []Node{
		{ID: "awq", Estimate: 20 * time.Minute, Run: rec("awq")},
		{ID: "c1", Estimate: time.Second, Run: rec("c1")},
		{ID: "c2", Estimate: time.Second, Needs: []string{"c1"}, Run: rec("c2")},
		{ID: "c3", Estimate: time.Second, Needs: []string{"c2"}, Run: rec("c3")},
	}
	if _, err := Run(context.Background(), nodes, Options{Jobs: 1}); err != nil {
		t.Fatal(err)
	}
	if order[0] != "awq" {
		t.Fatalf("order %v: the 20-minute node did not start first", order)
	}
}

// A weight computed when the node is ready sees what its needs made, and
// two nodes that fit the memory budget together run together.
func TestMemoryAskedWhenReady(t *testing.T) {
	var size atomic.Int64
	both := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(2)
	var once sync.Once
	together := func(context.Context) error {
		arrived.Done()
		go once.Do(func() { arrived.Wait(); close(both) })
		select {
		case <-both:
			return nil
		case <-time.After(liveness):
			return errBoom
		}
	}
	weigh := func() int64 { return size.Load() * 2 }
	res, err := Run(context.Background(), []Node{
		{ID: "fetch", Run: func(context.Context) error { size.Store(1000); return nil }},
		{ID: "a", Needs: []string{"fetch"}, MemoryMB: 99999, Memory: weigh, Run: together},
		{ID: "b", Needs: []string{"fetch"}, Memory: weigh, Run: together},
	}, Options{Jobs: 2, MemoryMB: 4000})
	if err != nil {
		t.Fatal(err)
	}
	if res["a"].MemoryMB != 2000 || res["b"].MemoryMB != 2000 {
		t.Fatalf("weights %d and %d, want 2000 each", res["a"].MemoryMB, res["b"].MemoryMB)
	}
}
