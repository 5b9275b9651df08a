package steps

import (
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
	var r Result
	if err := recordBench(&r, s, 2, 250_000_000); err != nil {
		t.Fatal(err)
	}
	m := r.Metrics
	want := map[string]float64{
		"timed_runs": 4, "decode_tokens": 4, "warmup_runs": 2, "prompt_tokens": 100, "threads": 2,
		"token_p50_ms": 25, "token_p95_ms": 38.5, "token_p99_ms": 39.7, "token_mean_ms": 25,
		"decode_tok_s":        40,                      // 1000 / 25 ms
		"first_token_ms":      250,                     // median prompt run
		"prompt_tok_s":        400,                     // 100 tokens / 250 ms mean
		"host_bandwidth_gb_s": 5,                       // as probed
		"host_ceiling_tok_s":  20,                      // 5e9 B/s / 250e6 B
		"efficiency":          2, "model_bytes": 250e6, // 40 / 20
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	if r.Facts["backend"] != "llama.cpp" || r.Facts["host"] != "h" {
		t.Errorf("facts %v", r.Facts)
	}
	if err := recordBench(&Result{}, s, 6, 1); err == nil {
		t.Error("every run a warm-up: want an error")
	}
}

func TestArtifactBytesLeavesOutTheStepsOwnFiles(t *testing.T) {
	dir := t.TempDir()
	for name, n := range map[string]int{"model.onnx": 100, "sub/tokenizer.json": 10, ResultFile: 7, "step.log": 5} {
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
