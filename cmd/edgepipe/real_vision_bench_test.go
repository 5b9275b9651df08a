package main

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// checkVisionBench checks what a vision target's bench measured (the
// recipes' bench: {warmup: 10, runs: 50, batch: 1}): the runtime that
// gated it, at the model's input shape, percentiles in order and
// positive, a throughput that is the mean's, and memory figures a real
// process has.
func checkVisionBench(t *testing.T, target string, b *manifest.VisionBench, runtime, version string, shape []int) {
	t.Helper()
	if b == nil {
		t.Fatalf("%s: no metrics.vision_bench: the recipe benches every target", target)
	}
	if b.Runtime != runtime || !strings.HasPrefix(b.RuntimeVersion, version) || b.WarmupRuns != 10 || b.TimedRuns != 50 ||
		b.Batch != 1 || !slices.Equal(b.InputShape, shape) || b.Threads < 1 {
		t.Errorf("%s: bench %+v: want %s (%s...), 10 warm-up and 50 timed runs of %v", target, b, runtime, version, shape)
	}
	if !(b.LatencyP50MS > 0 && b.LatencyP50MS <= b.LatencyP95MS && b.LatencyP95MS <= b.LatencyP99MS && b.LatencyP99MS <= b.MaxMS) ||
		!(b.MinMS > 0 && b.MinMS <= b.LatencyP50MS) {
		t.Errorf("%s: latencies min %v p50 %v p95 %v p99 %v max %v ms: want 0 < min <= p50 <= p95 <= p99 <= max",
			target, b.MinMS, b.LatencyP50MS, b.LatencyP95MS, b.LatencyP99MS, b.MaxMS)
	}
	if want := 1000 / b.MeanMS; math.Abs(b.ImagesPerS-want) > 1e-6*want {
		t.Errorf("%s: %v images/s, want 1000 / mean %v ms", target, b.ImagesPerS, b.MeanMS)
	}
	// A Python process with a runtime and a model: tens of MiB at least,
	// and loading the model adds to the runtime alone.
	if b.PeakRSSBytes < 20<<20 || b.PeakRSSBytes > 8<<30 || b.RSSBeforeLoadBytes <= 0 || b.PeakRSSBytes < b.RSSBeforeLoadBytes+b.RSSGrowthBytes ||
		b.RSSGrowthBytes <= 0 {
		t.Errorf("%s: peak RSS %d, before load %d, growth %d bytes: not what a process that loaded a model has",
			target, b.PeakRSSBytes, b.RSSBeforeLoadBytes, b.RSSGrowthBytes)
	}
}

// checkDecisionTable checks that the run's report.md has one decision row
// per target, with its latencies and memory, and a verdict matching the
// target's regular expression (failed ones in bold).
func checkDecisionTable(t *testing.T, out string, rows map[string]string) {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "### Decision table") {
		t.Fatalf("report.md has no decision table:\n%s", md)
	}
	for target, verdict := range rows {
		re := regexp.MustCompile(`\| ` + regexp.QuoteMeta(target) + ` \| .* \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ [KMG]iB \| [+-][0-9.]+ [KMG]?i?B \| ` + verdict + ` \|`)
		if !re.Match(md) {
			t.Errorf("report.md: no decision row for %s with its latencies, memory and %q:\n%s", target, verdict, md)
		}
	}
}
