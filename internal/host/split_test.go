package host

import (
	"reflect"
	"testing"
)

// The spans cover 0..n once, in order, with no empty span, whatever the
// number of parts asked for.
func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		n, parts int
		want     []span
	}{
		{10, 2, []span{{0, 5}, {5, 10}}},
		{10, 3, []span{{0, 3}, {3, 6}, {6, 10}}},
		{10, 1, []span{{0, 10}}},
		{10, 0, []span{{0, 10}}},  // at least one reader
		{10, -4, []span{{0, 10}}}, // likewise
		{2, 4, []span{{0, 1}, {1, 2}}},
		{0, 3, []span{}},
	} {
		if got := split(tc.n, tc.parts); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("split(%d, %d) = %v, want %v", tc.n, tc.parts, got, tc.want)
		}
	}
}

// Each chunk is handed to exactly one call, with its own index.
func TestEachIndexed(t *testing.T) {
	chunks := split(1000, 7)
	seen := make([]int, len(chunks))
	covered := make([]bool, 1000)
	eachIndexed(chunks, func(c, lo, hi int) {
		seen[c]++ // each index is its own goroutine's: no race
		for i := lo; i < hi; i++ {
			covered[i] = true
		}
	})
	for c, n := range seen {
		if n != 1 {
			t.Errorf("chunk %d handled %d times", c, n)
		}
	}
	for i, ok := range covered {
		if !ok {
			t.Fatalf("word %d not covered", i)
		}
	}
}
