package shared

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/edgepipe/edgepipe/steps"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/benchstat"
	"github.com/edgepipe/edgepipe/internal/host"
	"github.com/edgepipe/edgepipe/internal/manifest"
)

// bench measures a model on this host with the runtime that loads its
// format: per-token decode latency at a fixed KV-cache depth, time to
// first token and prompt throughput for a fixed prompt, and, beside them,
// the host's memory bandwidth, so decode speed is judged against the
// host's own ceiling (bandwidth / model bytes).
//
// Its output describes this machine as much as the model. It is cached,
// not rerun every time: a no-op rerun must stay free, and a measurement
// of the same bytes with the same tools on the same machine is the same
// measurement, give or take the noise that --force remeasures. What makes
// it safe to cache is that the host's identity (CPU model, core count,
// OS and architecture) joins the cache key (HostBound): a cache shared
// with, or copied to, another machine never hands it this machine's
// numbers.
type bench struct{}

// BenchParams are a bench step's: the runtime that times the model and
// the fixed input shape (see recipe.BenchSpec).
type BenchParams struct {
	Backend      string `json:"backend"`
	Warmup       int    `json:"warmup"`
	Runs         int    `json:"runs"`
	PromptTokens int    `json:"prompt_tokens"`
	// Threads is the runtime's thread count; 0 means every core.
	Threads  int `json:"threads"`
	ProbeMiB int `json:"probe_mib"`
}

func init() { steps.Register(bench{}) }

// BenchBackend is a runtime that times a model token by token on this
// host; a format family brings it (GGUF: llama.cpp, ONNX: ONNX Runtime),
// and a format's catalog row names it.
type BenchBackend interface {
	// Name is the backend's name in catalog rows and manifests.
	Name() string
	// Tool is the tool it runs.
	Tool() string
	// Measure returns reps prompt timings (a prompt-token prompt from an
	// empty cache) and reps single-token decode timings at a KV-cache
	// depth of prompt, in nanoseconds.
	Measure(ctx context.Context, sc *steps.Context, model string, prompt, reps, threads int) (promptNS, decodeNS []float64, err error)
}

var benchBackends = map[string]BenchBackend{}

// RegisterBenchBackend makes a backend available to the bench step.
func RegisterBenchBackend(b BenchBackend) {
	if _, dup := benchBackends[b.Name()]; dup {
		panic("steps: duplicate bench backend " + b.Name())
	}
	benchBackends[b.Name()] = b
}

func benchBackendNames() []string {
	var out []string
	for n := range benchBackends {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (bench) Name() string         { return "bench" }
func (bench) Version() int         { return 1 }
func (bench) HostIdentity() string { return host.Identity() }

func (bench) NewParams() any { return &BenchParams{} }

func (bench) Tools(p any) []string {
	if b, ok := benchBackends[steps.ParamsOf[BenchParams](p).Backend]; ok {
		return []string{b.Tool()}
	}
	return nil
}

// MetricBandwidthProbeSeconds is how long the bench step's memory
// bandwidth probe took: edgepipe's own work inside the step, which a
// script running only the runtime's benchmark would not do.
const MetricBandwidthProbeSeconds = "bandwidth_probe_s"

func (bench) Resources(p any) steps.Resources {
	// Every core, so the scheduler runs it alone: a measurement sharing
	// the cores with a conversion measures the conversion. Memory: the
	// bandwidth probe's buffer and the model loaded by its runtime.
	// Its runtime keeps its own OpenMP wait policy: the step measures
	// tokens/s as a user running the runtime would see them.
	return steps.Resources{Cores: runtime.NumCPU(), MemoryMB: int64(steps.ParamsOf[BenchParams](p).ProbeMiB) + 2048, OwnWaitPolicy: true}
}

// benchSamples are the raw timings kept beside the result, warm-up runs
// included, so the summary can be recomputed.
type benchSamples struct {
	Backend      string         `json:"backend"`
	Host         string         `json:"host"`
	Threads      int            `json:"threads"`
	PromptTokens int            `json:"prompt_tokens"`
	Warmup       int            `json:"warmup"`
	PromptNS     []float64      `json:"prompt_ns"`
	DecodeNS     []float64      `json:"decode_ns"`
	Bandwidth    host.Bandwidth `json:"bandwidth"`
}

func (bench) Run(ctx context.Context, sc *steps.Context) error {
	if len(sc.Inputs) == 0 {
		return fmt.Errorf("step %s needs the model step whose output it measures", sc.StepID)
	}
	model := sc.Inputs[0]
	rel := ""
	if model.Result != nil {
		rel = model.Result.Files["model"]
	}
	if rel == "" {
		return fmt.Errorf("step %s: %s recorded no model file to measure", sc.StepID, model.StepID)
	}
	modelPath := filepath.Join(model.Dir, rel)
	modelBytes, err := artifactBytes(model.Dir)
	if err != nil {
		return fmt.Errorf("step %s: size of %s: %w", sc.StepID, model.StepID, err)
	}
	bp := steps.ParamsOf[BenchParams](sc.Params)
	warmup, runs, prompt, threads := bp.Warmup, bp.Runs, bp.PromptTokens, bp.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	if warmup < 0 || runs < 1 || prompt < 1 {
		return fmt.Errorf("step %s: warmup %d, runs %d and prompt_tokens %d must be >= 0, >= 1 and >= 1", sc.StepID, warmup, runs, prompt)
	}

	// The probe first: it needs the memory bus to itself, and the runtime
	// has not loaded the model yet.
	probe := int64(bp.ProbeMiB) << 20
	probeStart := time.Now()
	bw, err := host.MemoryBandwidth(ctx, probe, 3)
	if err != nil {
		return fmt.Errorf("step %s: memory bandwidth probe: %w", sc.StepID, err)
	}
	sc.Result.SetMetric(MetricBandwidthProbeSeconds, time.Since(probeStart).Seconds())
	fmt.Fprintf(sc.Log, "bench: memory bandwidth %.2f GB/s (best of %d passes over %d MiB, %d readers)\n",
		bw.GBs, bw.Passes, bw.Bytes>>20, bw.Readers)

	s := benchSamples{Host: host.Identity(), Threads: threads, PromptTokens: prompt, Warmup: warmup, Bandwidth: bw}
	backend := bp.Backend
	b, ok := benchBackends[backend]
	if !ok {
		return fmt.Errorf("step %s: backend %q is not one the bench runs: %s", sc.StepID, backend, strings.Join(benchBackendNames(), ", "))
	}
	s.PromptNS, s.DecodeNS, err = b.Measure(ctx, sc, modelPath, prompt, warmup+runs, threads)
	if err != nil {
		return err
	}
	s.Backend = backend
	if err := recordBench(sc.Result, s, warmup, modelBytes); err != nil {
		return fmt.Errorf("step %s: %w (see %s)", sc.StepID, err, sc.LogPath)
	}
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(sc.Out, "samples.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	sc.Result.SetFile("samples", "samples.json")
	return nil
}

// recordBench turns raw samples into the step's metrics: per-token decode
// latency percentiles, decode and prompt rates, time to first token (the
// median prompt run: the prompt's forward pass is what yields the first
// token's logits), and efficiency against bandwidth / model bytes.
func recordBench(r *steps.Result, s benchSamples, warmup int, modelBytes int64) error {
	dec, err := benchstat.DropWarmup(s.DecodeNS, warmup)
	if err != nil {
		return fmt.Errorf("decode timings: %w", err)
	}
	pre, err := benchstat.DropWarmup(s.PromptNS, warmup)
	if err != nil {
		return fmt.Errorf("prompt timings: %w", err)
	}
	d, err := benchstat.Summarize(dec)
	if err != nil {
		return fmt.Errorf("decode timings: %w", err)
	}
	p, err := benchstat.Summarize(pre)
	if err != nil {
		return fmt.Errorf("prompt timings: %w", err)
	}
	decode := d.TokensPerS(1)
	b := &manifest.Bench{
		Backend:      s.Backend,
		Host:         s.Host,
		WarmupRuns:   warmup,
		TimedRuns:    d.Count,
		PromptTokens: s.PromptTokens,
		DecodeTokens: d.Count,
		Threads:      s.Threads,
		ModelBytes:   modelBytes,
		TokenP50MS:   d.P50MS,
		TokenP95MS:   d.P95MS,
		TokenP99MS:   d.P99MS,
		FirstTokenMS: p.P50MS,
		PromptTokS:   p.TokensPerS(float64(s.PromptTokens)),
		DecodeTokS:   decode,
	}
	bw := s.Bandwidth.GBs
	b.HostBandwidthGBs = &bw
	if modelBytes > 0 {
		ceiling := s.Bandwidth.GBs * 1e9 / float64(modelBytes)
		eff := decode / ceiling
		b.HostCeilingTokS, b.Efficiency = &ceiling, &eff
	}
	r.Bench = b
	r.SetMetric("token_mean_ms", d.MeanMS)
	return nil
}

// artifactBytes is what publish would copy of a model step's output:
// every file but the step's own result and log. The host ceiling divides
// by it, as the catalog ceilings in the manifest and report do.
func artifactBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if rel, _ := filepath.Rel(dir, p); rel == steps.ResultFile || rel == "step.log" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}

// ArtifactBytes is what publish would copy of a model step's output
// folder: every file but the step's own result and log.
func ArtifactBytes(dir string) (int64, error) { return artifactBytes(dir) }
