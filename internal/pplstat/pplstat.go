// Package pplstat gives a perplexity delta its uncertainty. A quality step
// that scores a converted model writes the negative log-likelihood of
// every token it scored (scores.nll: float64, little-endian, in scoring
// order), and so does the baseline's; the same text, tokenizer and chunks
// make the two files pair token for token. The delta's 95% interval comes
// from a paired bootstrap over those tokens, with a fixed seed, so a rerun
// gives the same interval.
package pplstat

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sort"
)

// NLLFile is the name of the per-token file in a quality step's output.
const NLLFile = "scores.nll"

// maxTokens bounds what a file may hold (64 Mi tokens: far beyond any
// evaluation text edgepipe scores), so a damaged file cannot exhaust memory.
const maxTokens = 64 << 20

// ReadNLL reads a scores.nll file.
func ReadNLL(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size()%8 != 0 || st.Size()/8 > maxTokens {
		return nil, fmt.Errorf("%s is not a per-token score file (%d bytes: want a multiple of 8, at most %d tokens)", path, st.Size(), maxTokens)
	}
	out := make([]float64, st.Size()/8)
	if err := binary.Read(io.LimitReader(f, st.Size()), binary.LittleEndian, out); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	for i, v := range out {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, fmt.Errorf("%s: token %d has a negative log-likelihood of %v", path, i, v)
		}
	}
	return out, nil
}

// WriteNLL writes a scores.nll file (the stand-ins' and tests' writer; the
// Python helpers write the same bytes with numpy).
func WriteNLL(path string, nll []float64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := binary.Write(f, binary.LittleEndian, nll); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// PPL is exp(mean NLL).
func PPL(nll []float64) float64 {
	s := 0.0
	for _, v := range nll {
		s += v
	}
	return math.Exp(s / float64(len(nll)))
}

// Interval is a delta's 95% interval.
type Interval struct {
	Delta, Low, High float64
	// Tokens are the paired tokens it rests on.
	Tokens int
}

// Resamples is how many bootstrap resamples an interval takes: at 2,000
// the 2.5th and 97.5th percentiles move by under 1% of the interval's
// width between seeds.
const Resamples = 2000

// seed fixes the resampling: the same two files always give the same
// interval.
const seed = 0x6564676570697065 // "edgepipe"

// PairedDelta is the perplexity delta of conv against base (PPL(conv) -
// PPL(base)) with its paired bootstrap 95% interval: the tokens are drawn
// with replacement, both models' values of a drawn token together.
func PairedDelta(base, conv []float64) (Interval, error) {
	n := len(base)
	if n == 0 || len(conv) != n {
		return Interval{}, fmt.Errorf("the baseline scored %d tokens and this model %d: they do not pair", n, len(conv))
	}
	iv := Interval{Delta: PPL(conv) - PPL(base), Tokens: n}
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	deltas := make([]float64, Resamples)
	for r := range deltas {
		var sb, sc float64
		for range n {
			i := rng.IntN(n)
			sb += base[i]
			sc += conv[i]
		}
		deltas[r] = math.Exp(sc/float64(n)) - math.Exp(sb/float64(n))
	}
	sort.Float64s(deltas)
	iv.Low = deltas[int(0.025*float64(Resamples))]
	iv.High = deltas[int(math.Ceil(0.975*float64(Resamples)))-1]
	return iv, nil
}

// TokensToDecide is how many scored tokens would make the interval clear
// of limit (a gate's max_delta) when it straddles it now: the interval's
// half-width shrinks with the square root of the tokens. 0 when it does
// not straddle the limit.
func TokensToDecide(iv Interval, limit float64) int {
	if !(iv.Low <= limit && limit <= iv.High) {
		return 0
	}
	gap := math.Abs(iv.Delta - limit)
	half := (iv.High - iv.Low) / 2
	if gap == 0 {
		return math.MaxInt32 // exactly on the limit: no number of tokens decides it
	}
	need := float64(iv.Tokens) * (half / gap) * (half / gap)
	return int(math.Ceil(need))
}
