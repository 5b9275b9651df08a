package host

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Bandwidth is the result of a streaming read test.
type Bandwidth struct {
	// GBs is the best pass's rate in GB/s (1e9 bytes, as the device
	// catalog's bandwidths are).
	GBs     float64 `json:"gb_s"`
	Bytes   int64   `json:"bytes"`
	Passes  int     `json:"passes"`
	Readers int     `json:"readers"`
}

// MemoryBandwidth measures how fast this host streams memory: a buffer of
// size bytes, filled first (so page faults are not timed), is read end to
// end by GOMAXPROCS goroutines, each summing its own slice; the best of
// passes is the figure. Decode reads every weight once per token the same
// way, so bandwidth / model size bounds the tokens per second. The buffer
// must be much larger than the CPU's last-level cache, or the figure is
// the cache's; 1 GiB is, on every CPU edgepipe targets.
//
// It takes a few hundred milliseconds for 1 GiB on a laptop; other work
// on the machine lowers the figure, which is why it is measured beside
// each bench rather than once.
func MemoryBandwidth(ctx context.Context, size int64, passes int) (Bandwidth, error) {
	const word = 8
	if size < 1<<20 {
		return Bandwidth{}, fmt.Errorf("bandwidth probe of %d bytes is too small to time: use at least 1 MiB", size)
	}
	if passes < 1 {
		return Bandwidth{}, errors.New("bandwidth probe needs at least one pass")
	}
	readers := runtime.GOMAXPROCS(0)
	buf, free := probeBuffer(size / word)
	defer free()
	chunks := split(len(buf), readers)
	each(chunks, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			buf[i] = uint64(i)
		}
	})
	var best time.Duration
	for p := 0; p < passes; p++ {
		if err := ctx.Err(); err != nil {
			return Bandwidth{}, err
		}
		sums := make([]uint64, len(chunks))
		start := time.Now()
		eachIndexed(chunks, func(c, lo, hi int) { sums[c] = sum(buf[lo:hi]) })
		d := time.Since(start)
		// The sums keep the reads alive: a compiler may drop loads whose
		// results nobody uses.
		runtime.KeepAlive(sums)
		if best == 0 || d < best {
			best = d
		}
	}
	bytes := int64(len(buf)) * word
	if best <= 0 {
		return Bandwidth{}, errors.New("the bandwidth probe's timer did not advance")
	}
	return Bandwidth{GBs: float64(bytes) / best.Seconds() / 1e9, Bytes: bytes, Passes: passes, Readers: readers}, nil
}

// sum adds s with four independent accumulators, so the loop is bound by
// loads, not by one chain of additions.
func sum(s []uint64) uint64 {
	var a, b, c, d uint64
	i := 0
	for ; i+4 <= len(s); i += 4 {
		a += s[i]
		b += s[i+1]
		c += s[i+2]
		d += s[i+3]
	}
	for ; i < len(s); i++ {
		a += s[i]
	}
	return a + b + c + d
}

type span struct{ lo, hi int }

func split(n, parts int) []span {
	if parts < 1 {
		parts = 1
	}
	out := make([]span, 0, parts)
	for p := 0; p < parts; p++ {
		lo, hi := n*p/parts, n*(p+1)/parts
		if hi > lo {
			out = append(out, span{lo, hi})
		}
	}
	return out
}

func each(chunks []span, f func(lo, hi int)) {
	eachIndexed(chunks, func(_, lo, hi int) { f(lo, hi) })
}

func eachIndexed(chunks []span, f func(c, lo, hi int)) {
	var wg sync.WaitGroup
	for c, s := range chunks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(c, s.lo, s.hi)
		}()
	}
	wg.Wait()
}
