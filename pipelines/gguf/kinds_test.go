package gguf

import (
	"math"
	"os"
	"testing"
)

// The logs under testdata are llama.cpp 0c1e57098's own output on the
// built-in SmolLM2-135M (hidden size 576, not a multiple of 256).
func TestQuantizeFallbacksFromRealLog(t *testing.T) {
	got := quantizeFallbacks("testdata/quantize-q4_k_m.log")
	want := "180 of 272 tensors required fallback quantization; 14 x q6_K->q8_0; 166 x q4_K->q5_0"
	if got != want {
		t.Errorf("quantizeFallbacks = %q\nwant %q", got, want)
	}
}

func TestParsePerplexityLogs(t *testing.T) {
	base, err := os.ReadFile("testdata/perplexity-base.log")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParsePerplexityLog(string(base))
	if err != nil {
		t.Fatal(err)
	}
	if b.PPL != 24.3127 || b.Chunks != 16 || !math.IsNaN(b.KLD) {
		t.Errorf("baseline: %+v", b)
	}
	kl, err := os.ReadFile("testdata/perplexity-kl.log")
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParsePerplexityLog(string(kl))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(k.PPL-25.3343) > 1e-3 || math.Abs(k.KLD-0.046472) > 1e-6 || math.Abs(k.SameTop-0.87304) > 1e-6 || k.DeltaSE != 0.151090 {
		t.Errorf("kl: %+v", k)
	}
	if !math.IsNaN(b.DeltaSE) {
		t.Errorf("the baseline's log has no delta, parsed %v", b.DeltaSE)
	}
	if _, err := ParsePerplexityLog("no numbers here"); err == nil {
		t.Error("a log without a final estimate parsed")
	}
}
