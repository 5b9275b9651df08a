package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// visionSample is an image-classification run: fp32 and int8 published
// on accuracy, an int8 target that failed its agreement gate (measured
// all the same), a tflite-int8 timed by a stand-in, and an unbenched one.
func visionSample() Report {
	const host = "linux/amd64; Intel(R) Xeon(R) Processor; 2 cores"
	bench := func(rt string, p50, p95, p99, mean float64, peak, growth, bytes int64) *manifest.VisionBench {
		return &manifest.VisionBench{Runtime: "onnxruntime", RuntimeVersion: rt, Host: host, WarmupRuns: 10, TimedRuns: 50,
			Batch: 1, InputShape: []int{1, 3, 32, 32}, InputDtype: "float32", Threads: 2, ModelBytes: bytes,
			LatencyP50MS: p50, LatencyP95MS: p95, LatencyP99MS: p99, MeanMS: mean, ImagesPerS: 1000 / mean,
			PeakRSSBytes: peak, RSSBeforeLoadBytes: 50 << 20, RSSGrowthBytes: growth, HostLoad1m: f(1.5 + p50/100)}
	}
	return Report{
		Recipe: "vision-digits", ExitCode: 3, ExitText: "a quality gate failed", Published: 2,
		Date: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), Version: "0.1.0-dev", Source: "builtin:mobilenetv3-small-digits",
		Targets: []Target{
			{Name: "cpu-fp32", Format: "onnx-fp32", Device: "x86-laptop", Outcome: OutcomePublished, Verdict: "excellent",
				Artifact: "artifacts/vision-digits/cpu-fp32", SizeBytes: 6_130_000,
				Accuracy:    &Accuracy{Reference: 0.9721, Converted: 0.9721, Drop: 0, MaxDrop: 0.01},
				VisionBench: bench("onnxruntime 1.23.2 CPUExecutionProvider", 0.912, 1.31, 2.07, 0.98, 97_400_000, 21_300_000, 6_130_000)},
			{Name: "cpu-int8", Format: "onnx-int8", Device: "x86-laptop", Outcome: OutcomePublished, Verdict: "ok",
				Artifact: "artifacts/vision-digits/cpu-int8", SizeBytes: 1_720_000,
				Accuracy:    &Accuracy{Reference: 0.9721, Converted: 0.9666, Drop: 0.0055, MaxDrop: 0.01},
				VisionBench: bench("onnxruntime 1.23.2 CPUExecutionProvider", 0.733, 0.951, 1.6, 0.78, 88_100_000, 9_800_000, 1_720_000)},
			{Name: "photos-int8", Format: "onnx-int8", Device: "x86-laptop", Outcome: OutcomeGateFailed, Verdict: "fail",
				Agreement:   &AgreementGate{Agreement: 0.6528, Min: 0.99},
				VisionBench: bench("onnxruntime 1.23.2 CPUExecutionProvider", 31.4, 40.2, 128.5, 33.0, 140_000_000, -2_000_000, 5_400_000),
				Error:       "target photos-int8 failed its quality gate: top-1 agreement 0.6528 under min 0.9900"},
			{Name: "android-int8", Format: "tflite-int8", Device: "snapdragon-8-gen-3", Outcome: OutcomePublished, Verdict: "excellent",
				Artifact: "artifacts/vision-digits/android-int8", SizeBytes: 1_650_000, StandIns: []string{"vision-bench:litert-convert:tflite-int8"},
				Accuracy: &Accuracy{Reference: 0.9721, Converted: 0.9721, MaxDrop: 0.01},
				VisionBench: &manifest.VisionBench{Runtime: "litert", RuntimeVersion: "litert_bench stand-in (go1.25.0), not a runtime", Host: host,
					WarmupRuns: 10, TimedRuns: 50, Batch: 1, InputShape: []int{1, 3, 32, 32}, InputDtype: "float32", Threads: 2,
					LatencyP50MS: 0.0041, LatencyP95MS: 0.0052, LatencyP99MS: 0.0107, MeanMS: 0.0045, ImagesPerS: 222222, PeakRSSBytes: 31_000_000},
				VisionBenchStandIn: true},
			{Name: "cpu-int8-nobench", Format: "onnx-int8", Device: "x86-laptop", Outcome: OutcomePublished, Verdict: "ok",
				Artifact: "artifacts/vision-digits/cpu-int8-nobench", SizeBytes: 1_720_000,
				Accuracy: &Accuracy{Reference: 0.9721, Converted: 0.9666, Drop: 0.0055, MaxDrop: 0.01}},
		},
		Failures: []Failure{{Subject: "photos-int8", Message: "target photos-int8 failed its quality gate: top-1 agreement 0.6528 under min 0.9900"}},
	}
}

// The decision table in both reports, byte for byte.
func TestDecisionTableGolden(t *testing.T) {
	page, err := HTML(visionSample())
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"vision.golden.md": Markdown(visionSample()), "vision.golden.html": page} {
		golden := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/report -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs (run go test ./internal/report -update after checking the change):\n%s", golden, got)
		}
	}
}

// Every row's cells: a failed target keeps its measurement and is marked
// failed; one without a bench has dashes; a stand-in is marked; size comes
// from the bench when nothing was published.
func TestDecisionRows(t *testing.T) {
	rows := visionSample().Decision()
	if len(rows) != 5 {
		t.Fatalf("want 5 rows, got %d: %+v", len(rows), rows)
	}
	failed := rows[2]
	if !failed.Failed || failed.P99 != "128.5" || failed.Size != "5.1 MiB" || failed.Growth != "-1.9 MiB" ||
		failed.Quality != "agreement 65.28%" || failed.Drop != "34.72% changed class (max 1.00%)" || failed.Verdict != "fail, not published" {
		t.Errorf("gate-failed row = %+v", failed)
	}
	if r := rows[1]; r.Quality != "top-1 96.66%" || r.Drop != "0.55 pt (max 1.00)" || r.P50 != "0.733" || r.Verdict != "ok, published" || r.Failed {
		t.Errorf("int8 row = %+v", r)
	}
	if !rows[3].StandIn || rows[0].StandIn {
		t.Errorf("stand-in marks: %v %v", rows[3].StandIn, rows[0].StandIn)
	}
	if r := rows[4]; r.P50 != "-" || r.PeakRSS != "-" || r.Runtime != "-" {
		t.Errorf("unbenched row = %+v", r)
	}
	// No bench anywhere: no table (the text-generation reports are unchanged).
	if sample().Decision() != nil || strings.Contains(string(Markdown(sample())), "Decision table") {
		t.Error("a run without a vision bench has a decision table")
	}
}
