package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// benchRecipe is the demo's Q8_0 target (same quality settings, so its
// conversion and perplexity steps are the demo's cache entries) with a
// short bench.
const benchRecipe = `edgepipe: 1
name: bench
model: {source: builtin:smollm2-135m}
quality: {perplexity: {context: 512, max_chunks: 16}}
targets:
  q8:
    device: x86-laptop
    format: gguf-q8_0
    context: 8192
    min_tokens_per_s: 0.5
    bench: {warmup: 2, runs: 8, prompt_tokens: 32, probe_mib: 256}
`

// TestRealBench measures the built-in model's Q8_0 GGUF with the real
// llama-bench and the bandwidth probe, and checks what the manifest and
// the report record: real tools, percentiles in order, rates that agree
// with the latencies, and efficiency against the host's ceiling.
func TestRealBench(t *testing.T) {
	t.Parallel() // two real tests at a time share the cores (docs/testing.md)
	run, work := realEdgepipe(t, "after `edgepipe toolchain install llamacpp`")
	if err := os.WriteFile(filepath.Join(work, "bench.yaml"), []byte(benchRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	out := run("run", "-j", "2", "bench.yaml")
	t.Logf("edgepipe run bench.yaml:\n%s", out)
	if !strings.Contains(string(out), "bench q8 (llama.cpp, ") || strings.Contains(string(out), "stand-in") {
		t.Errorf("the run summary has no real bench line:\n%s", out)
	}
	m, err := manifest.Read(filepath.Join(work, "artifacts", "bench", "q8"))
	if err != nil {
		t.Fatal(err)
	}
	b := m.Metrics.Bench
	if b == nil {
		t.Fatal("the manifest has no metrics.bench")
	}
	for _, s := range m.Steps {
		if s.Kind == "bench" && (s.StandIn || !strings.Contains(s.ToolVersions["llama-bench"], "llama.cpp") || strings.Contains(s.ToolVersions["llama-bench"], "stand-in")) {
			t.Errorf("bench step %s: stand-in %v, llama-bench version %q", s.ID, s.StandIn, s.ToolVersions["llama-bench"])
		}
	}
	if b.Backend != "llama.cpp" || b.WarmupRuns != 2 || b.TimedRuns != 8 || b.PromptTokens != 32 || b.DecodeTokens != 8 {
		t.Errorf("bench settings %+v", b)
	}
	if !(b.TokenP50MS > 0 && b.TokenP50MS <= b.TokenP95MS && b.TokenP95MS <= b.TokenP99MS) {
		t.Errorf("percentiles out of order: p50 %v, p95 %v, p99 %v", b.TokenP50MS, b.TokenP95MS, b.TokenP99MS)
	}
	// The mean rate lies between the rates of the fastest and slowest
	// percentile shown; a p99 token cannot be faster than the rate.
	if !(b.DecodeTokS > 0 && b.DecodeTokS >= 1000/b.TokenP99MS) {
		t.Errorf("decode %v tok/s against p99 %v ms", b.DecodeTokS, b.TokenP99MS)
	}
	if !(b.FirstTokenMS > 0) || !(b.PromptTokS > 0) {
		t.Errorf("first token %v ms, prompt %v tok/s", b.FirstTokenMS, b.PromptTokS)
	}
	if b.HostBandwidthGBs == nil || b.HostCeilingTokS == nil || b.Efficiency == nil {
		t.Fatalf("no host ceiling: %+v", b)
	}
	if bw := *b.HostBandwidthGBs; !(bw > 0) || math.IsInf(bw, 0) {
		t.Errorf("host bandwidth %v GB/s", bw)
	}
	if want := *b.HostBandwidthGBs * 1e9 / float64(b.ModelBytes); math.Abs(*b.HostCeilingTokS-want) > 1e-6*want {
		t.Errorf("host ceiling %v, want bandwidth / model bytes = %v", *b.HostCeilingTokS, want)
	}
	if b.ModelBytes != *m.Metrics.SizeBytes {
		t.Errorf("the ceiling divides by %d bytes, the artifact has %d", b.ModelBytes, *m.Metrics.SizeBytes)
	}
	if e := *b.Efficiency; !(e > 0) || math.Abs(e - b.DecodeTokS / *b.HostCeilingTokS) > 1e-9 {
		t.Errorf("efficiency %v, decode %v, ceiling %v", e, b.DecodeTokS, *b.HostCeilingTokS)
	}
	if bu := m.Budgets; bu == nil || bu.MinTokensPerS == nil || bu.MinTokensPerS.Actual == nil || *bu.MinTokensPerS.Actual != b.DecodeTokS {
		t.Errorf("budgets %+v: min_tokens_per_s.actual should be the measured decode rate", bu)
	}
	page, err := os.ReadFile(filepath.Join(work, "artifacts", "bench", "report.html"))
	if err != nil || !strings.Contains(string(page), "<svg") {
		t.Errorf("report.html: %v", err)
	}
	t.Logf("q8: decode %.1f tok/s (p50 %.2f, p95 %.2f, p99 %.2f ms), first token %.1f ms, host %.2f GB/s, ceiling %.1f tok/s, efficiency %.2f",
		b.DecodeTokS, b.TokenP50MS, b.TokenP95MS, b.TokenP99MS, b.FirstTokenMS, *b.HostBandwidthGBs, *b.HostCeilingTokS, *b.Efficiency)
}
