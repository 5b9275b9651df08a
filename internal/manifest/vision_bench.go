package manifest

import (
	"fmt"
	"math"
)

// VisionBench is an on-host measurement of an image classifier at a fixed
// input shape: TimedRuns single inferences of Batch images (InputShape),
// after WarmupRuns discarded ones, in the runtime that gated it, in a
// process of its own. Latencies are per inference (per batch).
type VisionBench struct {
	// Runtime is the bench runtime's name (onnxruntime, litert), and
	// RuntimeVersion what ran: the library, its version and its provider
	// or delegate.
	Runtime        string `json:"runtime"`
	RuntimeVersion string `json:"runtime_version"`
	// Host names the machine measured (OS/arch, CPU model, cores).
	Host       string `json:"host,omitempty"`
	WarmupRuns int    `json:"warmup_runs"`
	TimedRuns  int    `json:"timed_runs"`
	Batch      int    `json:"batch"`
	InputShape []int  `json:"input_shape"`
	InputDtype string `json:"input_dtype"`
	Threads    int    `json:"threads"`
	// ModelBytes is the artifact's size (every file publish would copy).
	ModelBytes   int64   `json:"model_bytes,omitempty"`
	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP95MS float64 `json:"latency_p95_ms"`
	LatencyP99MS float64 `json:"latency_p99_ms"`
	MeanMS       float64 `json:"latency_mean_ms"`
	MinMS        float64 `json:"latency_min_ms"`
	MaxMS        float64 `json:"latency_max_ms"`
	// ImagesPerS is Batch images over the mean latency.
	ImagesPerS float64 `json:"images_per_s"`
	// PeakRSSBytes is the bench process's peak resident set (VmHWM on
	// Linux; getrusage's ru_maxrss elsewhere, which Linux would carry
	// over from edgepipe): the interpreter, the runtime's libraries, the
	// model and its working memory together, an upper bound on what the
	// model needs.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// RSSBeforeLoadBytes is the process's resident set once the runtime
	// was imported and before the model was loaded; RSSGrowthBytes is
	// the resident set after the timed runs minus it: what loading and
	// running the model added and kept (the runtime may free or reuse
	// memory, so it can be below the model's transient peak).
	RSSBeforeLoadBytes int64 `json:"rss_before_load_bytes"`
	RSSGrowthBytes     int64 `json:"rss_growth_bytes"`
	// HostLoad1m is the host's 1-minute load average just before the
	// runs (Linux): above the core count, other work shared the CPUs
	// and the tail latencies measure it too. Absent where unknown.
	HostLoad1m *float64 `json:"host_load_1m,omitempty"`
}

// validate reports figures no measurement can give.
func (b *VisionBench) validate() []error {
	var errs []error
	for name, v := range map[string]float64{"latency_p50_ms": b.LatencyP50MS, "latency_p95_ms": b.LatencyP95MS,
		"latency_p99_ms": b.LatencyP99MS, "latency_mean_ms": b.MeanMS, "images_per_s": b.ImagesPerS} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			errs = append(errs, fmt.Errorf("metrics.vision_bench.%s is %v: a timed inference takes a positive time", name, v))
		}
	}
	if b.TimedRuns < 1 || b.Batch < 1 {
		errs = append(errs, fmt.Errorf("metrics.vision_bench: %d timed runs of batch %d: a bench has at least one run of one image", b.TimedRuns, b.Batch))
	}
	if !(b.LatencyP50MS <= b.LatencyP95MS && b.LatencyP95MS <= b.LatencyP99MS) {
		errs = append(errs, fmt.Errorf("metrics.vision_bench percentiles out of order: p50 %v, p95 %v, p99 %v", b.LatencyP50MS, b.LatencyP95MS, b.LatencyP99MS))
	}
	if b.PeakRSSBytes <= 0 {
		errs = append(errs, fmt.Errorf("metrics.vision_bench.peak_rss_bytes is %d: a process that ran has a resident set", b.PeakRSSBytes))
	}
	return errs
}
