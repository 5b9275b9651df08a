// Package benchstat summarises latency samples: the percentiles and rates
// the bench step reports. It has no notion of models or tools, so the
// llama.cpp and ONNX Runtime paths (and their stand-ins) are judged by the
// same arithmetic.
package benchstat

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Percentile returns the p-th percentile (0 <= p <= 100) of samples by
// linear interpolation between the closest ranks (the "type 7" estimator of
// R and NumPy's default), so p50 of an even count is the mean of the two
// middle samples and p99 of 50 samples sits between the two largest rather
// than jumping to the maximum. samples need not be sorted; it is not
// modified.
func Percentile(samples []float64, p float64) (float64, error) {
	if len(samples) == 0 {
		return 0, errors.New("no samples")
	}
	if p < 0 || p > 100 || math.IsNaN(p) {
		return 0, fmt.Errorf("percentile %v is outside 0..100", p)
	}
	s := slices.Clone(samples)
	for _, v := range s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("sample %v is not a finite number", v)
		}
	}
	slices.Sort(s)
	rank := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	frac := rank - float64(lo)
	return s[lo] + frac*(s[hi]-s[lo]), nil
}

// Latency is the summary of per-token latencies, in milliseconds.
type Latency struct {
	Count  int     `json:"count"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P95MS  float64 `json:"p95_ms"`
	P99MS  float64 `json:"p99_ms"`
	MinMS  float64 `json:"min_ms"`
	MaxMS  float64 `json:"max_ms"`
}

// TokensPerS is the rate the samples add up to: tokens / total time. It is
// the mean rate, not 1000 / p50, so slow tokens count as a user sees them.
func (l Latency) TokensPerS(tokensPerSample float64) float64 {
	if l.MeanMS <= 0 {
		return 0
	}
	return tokensPerSample * 1000 / l.MeanMS
}

// Summarize computes the latency summary of samples given in nanoseconds
// (what llama-bench reports and what the ONNX helper measures). Every
// sample must be positive and finite: a zero-length token is a broken
// timer, not a fast model.
func Summarize(samplesNS []float64) (Latency, error) {
	if len(samplesNS) == 0 {
		return Latency{}, errors.New("no samples to summarise")
	}
	ms := make([]float64, len(samplesNS))
	sum := 0.0
	for i, ns := range samplesNS {
		if !(ns > 0) || math.IsInf(ns, 0) {
			return Latency{}, fmt.Errorf("sample %d is %v ns: every timed run must take a positive, finite time", i, ns)
		}
		ms[i] = ns / 1e6
		sum += ms[i]
	}
	l := Latency{Count: len(ms), MeanMS: sum / float64(len(ms)), MinMS: slices.Min(ms), MaxMS: slices.Max(ms)}
	var err error
	if l.P50MS, err = Percentile(ms, 50); err != nil {
		return Latency{}, err
	}
	if l.P95MS, err = Percentile(ms, 95); err != nil {
		return Latency{}, err
	}
	if l.P99MS, err = Percentile(ms, 99); err != nil {
		return Latency{}, err
	}
	return l, nil
}

// DropWarmup returns samples without their first n (the warm-up runs),
// or an error when nothing timed would be left.
func DropWarmup(samples []float64, n int) ([]float64, error) {
	if n < 0 {
		return nil, fmt.Errorf("warm-up count %d is negative", n)
	}
	if len(samples) <= n {
		return nil, fmt.Errorf("%d samples, all of them warm-up runs (%d): no timed run is left", len(samples), n)
	}
	return samples[n:], nil
}

// Median is the middle value of xs, the mean of the middle two for an even
// count (truncated for integer types), or 0 for none; xs is not modified.
func Median[T ~int64 | ~float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
