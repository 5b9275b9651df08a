package shared

import "testing"

func TestRunStepThreads(t *testing.T) {
	for _, tt := range []struct {
		min, max, lo, hi int
	}{{0, 0, 1, 1}, {1, 2, 1, 2}, {2, 0, 2, 2}, {3, 2, 3, 3}} {
		r := runKind{}.Resources(&RunParams{MinThreads: tt.min, MaxThreads: tt.max})
		if r.MinCores != tt.lo || r.Cores != tt.hi {
			t.Errorf("min_threads %d max_threads %d: cores %d-%d, want %d-%d", tt.min, tt.max, r.MinCores, r.Cores, tt.lo, tt.hi)
		}
	}
}
