package benchstat

import (
	"math"
	"testing"
	"time"
)

func TestPercentileInterpolatesBetweenRanks(t *testing.T) {
	// 1..10 shuffled: ranks are value-1.
	s := []float64{7, 1, 10, 3, 5, 2, 9, 4, 8, 6}
	for _, c := range []struct{ p, want float64 }{
		{0, 1}, {100, 10}, {50, 5.5}, {95, 9.55}, {99, 9.91}, {25, 3.25},
	} {
		got, err := Percentile(s, c.p)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-c.want) > 1e-9 {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if s[0] != 7 {
		t.Errorf("Percentile sorted its input in place: %v", s)
	}
}

func TestPercentileOfOneSample(t *testing.T) {
	for _, p := range []float64{0, 50, 99, 100} {
		if got, _ := Percentile([]float64{42}, p); got != 42 {
			t.Errorf("p%v of one sample = %v", p, got)
		}
	}
}

func TestPercentileRefusesBadInput(t *testing.T) {
	if _, err := Percentile(nil, 50); err == nil {
		t.Error("no samples: want an error")
	}
	for _, p := range []float64{-1, 101, math.NaN()} {
		if _, err := Percentile([]float64{1}, p); err == nil {
			t.Errorf("p=%v: want an error", p)
		}
	}
	if _, err := Percentile([]float64{1, math.NaN()}, 50); err == nil {
		t.Error("NaN sample: want an error")
	}
}

func TestSummarizeInMilliseconds(t *testing.T) {
	// 100 samples of 1..100 ms, in ns.
	var ns []float64
	for i := 100; i >= 1; i-- {
		ns = append(ns, float64(i)*1e6)
	}
	l, err := Summarize(ns)
	if err != nil {
		t.Fatal(err)
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("mean", l.MeanMS, 50.5)
	near("p50", l.P50MS, 50.5)
	near("p95", l.P95MS, 95.05)
	near("p99", l.P99MS, 99.01)
	near("min", l.MinMS, 1)
	near("max", l.MaxMS, 100)
	if l.Count != 100 {
		t.Errorf("count = %d", l.Count)
	}
	// 1 token per sample at a mean of 50.5 ms.
	near("tok/s", l.TokensPerS(1), 1000/50.5)
	// A prompt of 128 tokens per sample.
	near("prompt tok/s", l.TokensPerS(128), 128*1000/50.5)
}

func TestSummarizeRefusesNonPositiveSamples(t *testing.T) {
	for _, bad := range [][]float64{nil, {1e6, 0}, {-5}, {math.Inf(1)}, {math.NaN()}} {
		if _, err := Summarize(bad); err == nil {
			t.Errorf("Summarize(%v): want an error", bad)
		}
	}
}

func TestDropWarmup(t *testing.T) {
	got, err := DropWarmup([]float64{9, 9, 1, 2, 3}, 2)
	if err != nil || len(got) != 3 || got[0] != 1 {
		t.Errorf("DropWarmup = %v, %v", got, err)
	}
	if _, err := DropWarmup([]float64{1, 2}, 2); err == nil {
		t.Error("all warm-up: want an error")
	}
	if _, err := DropWarmup([]float64{1}, -1); err == nil {
		t.Error("negative warm-up: want an error")
	}
}

func TestMedian(t *testing.T) {
	if got := Median([]time.Duration{5, 1, 3}); got != 3 {
		t.Errorf("odd count: %v", got)
	}
	if got := Median([]time.Duration{4, 1, 3, 2}); got != 2 {
		t.Errorf("even count: %v (want the mean of 2 and 3, truncated)", got)
	}
	if got := Median([]int64{10, 30, 20, 40}); got != 25 {
		t.Errorf("int64: %v", got)
	}
	if got := Median([]float64{0.5, 0.1, 0.2, 0.4}); math.Abs(got-0.3) > 1e-12 {
		t.Errorf("float64: %v", got)
	}
	if got := Median[float64](nil); got != 0 {
		t.Errorf("none: %v", got)
	}
	in := []time.Duration{3, 1, 2}
	Median(in)
	if in[0] != 3 {
		t.Error("Median sorted its argument in place")
	}
}
