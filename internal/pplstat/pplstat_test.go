package pplstat

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

func synthetic(n int, shift float64, r *rand.Rand) (base, conv []float64) {
	for range n {
		b := 2 + r.ExpFloat64()
		base = append(base, b)
		conv = append(conv, math.Max(0, b+shift+0.3*r.NormFloat64()))
	}
	return base, conv
}

func TestPairedDeltaCoversTheTruthAndNarrowsWithTokens(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base, conv := synthetic(2000, 0.05, r)
	iv, err := PairedDelta(base, conv)
	if err != nil {
		t.Fatal(err)
	}
	if !(iv.Low < iv.Delta && iv.Delta < iv.High) || iv.Tokens != 2000 {
		t.Fatalf("interval %+v does not surround its delta", iv)
	}
	if want := PPL(conv) - PPL(base); iv.Delta != want {
		t.Fatalf("delta %v, want %v", iv.Delta, want)
	}
	big, bigConv := synthetic(32000, 0.05, r)
	wide, _ := PairedDelta(big, bigConv)
	if !(wide.High-wide.Low < (iv.High-iv.Low)/2) {
		t.Fatalf("16x the tokens left the interval %v wide (was %v): it should be about a quarter", wide.High-wide.Low, iv.High-iv.Low)
	}
	again, _ := PairedDelta(base, conv)
	if again != iv {
		t.Fatalf("the same files gave %+v, then %+v", iv, again)
	}
}

func TestPairedDeltaIsPaired(t *testing.T) {
	// The same large token-to-token spread in both models, a tiny constant
	// shift: a paired interval sees the shift clearly; an unpaired one
	// would straddle zero.
	r := rand.New(rand.NewPCG(3, 4))
	var base, conv []float64
	for range 3000 {
		b := 5 * r.ExpFloat64()
		base = append(base, b)
		conv = append(conv, b+0.01)
	}
	iv, _ := PairedDelta(base, conv)
	if !(iv.Low > 0) {
		t.Fatalf("a constant +0.01 nats on every token: interval %+v reaches zero", iv)
	}
}

func TestPairedDeltaRefusesUnpairedFiles(t *testing.T) {
	if _, err := PairedDelta([]float64{1, 2}, []float64{1}); err == nil {
		t.Fatal("files of 2 and 1 tokens paired")
	}
	if _, err := PairedDelta(nil, nil); err == nil {
		t.Fatal("empty files paired")
	}
}

func TestTokensToDecide(t *testing.T) {
	iv := Interval{Delta: 1.9, Low: 1.7, High: 2.1, Tokens: 1000}
	// Half-width 0.2, gap 0.1: (0.2/0.1)^2 = 4x the tokens.
	if got := TokensToDecide(iv, 2.0); got != 4000 {
		t.Fatalf("TokensToDecide = %d, want 4000", got)
	}
	if got := TokensToDecide(iv, 2.5); got != 0 {
		t.Fatalf("an interval clear of the limit: %d, want 0", got)
	}
}

func TestNLLFileRoundTripAndRefusals(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, NLLFile)
	want := []float64{0.5, 3.25, 11}
	if err := WriteNLL(p, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadNLL(p)
	if err != nil || len(got) != 3 || got[1] != 3.25 {
		t.Fatalf("read %v, %v", got, err)
	}
	if err := WriteNLL(p, []float64{1, math.NaN()}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadNLL(p); err == nil {
		t.Fatal("a NaN log-likelihood was read")
	}
	if _, err := ReadNLL(dir); err == nil {
		t.Fatal("a folder was read as a score file")
	}
}
