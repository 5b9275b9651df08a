package shared

import (
	"github.com/edgepipe/edgepipe/steps"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/internal/host"
)

// recordBench drops the warm-up runs and derives every figure from the
// timed ones.
func TestRecordBench(t *testing.T) {
	s := benchSamples{Backend: "llama.cpp", Host: "h", Threads: 2, PromptTokens: 100,
		// Two warm-up runs (huge) then 4 timed ones.
		PromptNS:  []float64{9e9, 9e9, 100e6, 200e6, 300e6, 400e6},
		DecodeNS:  []float64{9e9, 9e9, 10e6, 20e6, 30e6, 40e6},
		Bandwidth: host.Bandwidth{GBs: 5}}
	var r steps.Result
	if err := recordBench(&r, s, 2, 250_000_000); err != nil {
		t.Fatal(err)
	}
	b := r.Bench
	if b == nil {
		t.Fatal("no bench recorded")
	}
	want := map[string][2]float64{
		"timed_runs": {float64(b.TimedRuns), 4}, "decode_tokens": {float64(b.DecodeTokens), 4},
		"warmup_runs": {float64(b.WarmupRuns), 2}, "prompt_tokens": {float64(b.PromptTokens), 100}, "threads": {float64(b.Threads), 2},
		"token_p50_ms": {b.TokenP50MS, 25}, "token_p95_ms": {b.TokenP95MS, 38.5}, "token_p99_ms": {b.TokenP99MS, 39.7},
		"token_mean_ms":       {r.Metrics["token_mean_ms"], 25},
		"decode_tok_s":        {b.DecodeTokS, 40},             // 1000 / 25 ms
		"first_token_ms":      {b.FirstTokenMS, 250},          // median prompt run
		"prompt_tok_s":        {b.PromptTokS, 400},            // 100 tokens / 250 ms mean
		"host_bandwidth_gb_s": {deref(b.HostBandwidthGBs), 5}, // as probed
		"host_ceiling_tok_s":  {deref(b.HostCeilingTokS), 20}, // 5e9 B/s / 250e6 B
		"efficiency":          {deref(b.Efficiency), 2},       // 40 / 20
		"model_bytes":         {float64(b.ModelBytes), 250e6},
	}
	for k, v := range want {
		if math.Abs(v[0]-v[1]) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, v[0], v[1])
		}
	}
	if b.Backend != "llama.cpp" || b.Host != "h" {
		t.Errorf("backend %q, host %q", b.Backend, b.Host)
	}
	if err := recordBench(&steps.Result{}, s, 6, 1); err == nil {
		t.Error("every run a warm-up: want an error")
	}
}

func TestArtifactBytesLeavesOutTheStepsOwnFiles(t *testing.T) {
	dir := t.TempDir()
	for name, n := range map[string]int{"model.onnx": 100, "sub/tokenizer.json": 10, steps.ResultFile: 7, "step.log": 5} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := artifactBytes(dir); err != nil || n != 110 {
		t.Errorf("artifactBytes = %d, %v; want 110", n, err)
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}
