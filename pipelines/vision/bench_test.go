package vision

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/pipelines/vision/report"
)

func benchSample(lat ...float64) report.Bench {
	return report.Bench{LatencyNS: lat, Batch: 1, Threads: 2, InputShape: []int{1, 3, 32, 32}, InputDtype: "float32",
		RuntimeVersion: "onnxruntime 1.31.1 CPUExecutionProvider", PeakRSS: 80 << 20, RSSBeforeLoad: 50 << 20, RSSAfterRuns: 70 << 20}
}

// The warm-up runs are dropped; percentiles, the mean and images/s come
// from the timed runs; memory is peak and growth over the runtime alone.
func TestSummarizeBench(t *testing.T) {
	p := &BenchParams{Warmup: 2, Runs: 4, Batch: 1}
	// Warm-up runs are slow (100 ms): none of them may reach the figures.
	vb, err := summarizeBench(benchSample(100e6, 100e6, 1e6, 2e6, 3e6, 4e6), p, 2)
	if err != nil {
		t.Fatal(err)
	}
	if vb.TimedRuns != 4 || vb.WarmupRuns != 2 || vb.MaxMS != 4 || vb.MinMS != 1 || vb.MeanMS != 2.5 || vb.LatencyP50MS != 2.5 {
		t.Errorf("figures %+v: want the 4 timed runs only (1-4 ms)", vb)
	}
	if !(vb.LatencyP50MS <= vb.LatencyP95MS && vb.LatencyP95MS <= vb.LatencyP99MS && vb.LatencyP99MS <= 4) {
		t.Errorf("percentiles %v %v %v out of order", vb.LatencyP50MS, vb.LatencyP95MS, vb.LatencyP99MS)
	}
	if vb.ImagesPerS != 400 || vb.RSSGrowthBytes != 20<<20 || vb.PeakRSSBytes != 80<<20 {
		t.Errorf("images/s %v, growth %d, peak %d", vb.ImagesPerS, vb.RSSGrowthBytes, vb.PeakRSSBytes)
	}
	// A batch of 4 at the same latency is four times the images.
	r := benchSample(1e6, 1e6)
	r.Batch, r.InputShape = 4, []int{4, 3, 32, 32}
	if vb, err := summarizeBench(r, &BenchParams{Runs: 2, Batch: 4}, 2); err != nil || vb.ImagesPerS != 4000 {
		t.Errorf("batch 4: %+v, %v", vb, err)
	}
}

// A script that did not do what it was asked is an error, never a figure.
func TestSummarizeBenchRefuses(t *testing.T) {
	p := &BenchParams{Warmup: 1, Runs: 2, Batch: 1}
	for name, c := range map[string]struct {
		mod  func(*report.Bench)
		want string
	}{
		"runs":     {func(r *report.Bench) { r.LatencyNS = r.LatencyNS[:2] }, "reported 2 timings"},
		"threads":  {func(r *report.Bench) { r.Threads = 1 }, "on 1 threads"},
		"batch":    {func(r *report.Bench) { r.InputShape = []int{8, 3, 32, 32} }, "input shape [8 3 32 32]"},
		"memory":   {func(r *report.Bench) { r.PeakRSS = 0 }, "no memory figures"},
		"version":  {func(r *report.Bench) { r.RuntimeVersion = "" }, "no memory figures or runtime version"},
		"zero":     {func(r *report.Bench) { r.LatencyNS[2] = 0 }, "positive"},
		"negative": {func(r *report.Bench) { r.LatencyNS[1] = -5 }, "positive"},
	} {
		r := benchSample(1e6, 2e6, 3e6)
		c.mod(&r)
		if _, err := summarizeBench(r, p, 2); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

// Every format of the family has a bench runtime, in the toolchain that
// gates it; a format registered twice is a programming error.
func TestBenchRuntimes(t *testing.T) {
	for format, want := range map[string]string{FormatFP32: BenchONNXRuntime, FormatInt8: BenchONNXRuntime, FormatTFLiteInt8: BenchLiteRT,
		FormatOpenVINOInt8: BenchOpenVINO} {
		if got, ok := benchRuntimeFor(format); !ok || got != want {
			t.Errorf("%s: runtime %q, want %q", format, got, want)
		}
	}
	if _, ok := benchRuntimeFor("coreml-int8"); ok {
		t.Error("coreml-int8 has a bench runtime here")
	}
	defer func() {
		if recover() == nil {
			t.Error("a second runtime for onnx-int8 was accepted")
		}
	}()
	RegisterBenchRuntime(BenchRuntime{Name: "other", Tool: "other.py", Formats: []string{FormatInt8}})
}
