package vision

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/edgepipe/edgepipe/internal/benchstat"
	"github.com/edgepipe/edgepipe/internal/host"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/pipelines/litert"
	"github.com/edgepipe/edgepipe/pipelines/vision/report"
	"github.com/edgepipe/edgepipe/steps"
)

// KindBench times a vision target's artifact on this host, in the
// runtime that gated it, in a process of its own.
const KindBench = "vision-bench"

// ToolBench times an ONNX classifier on ONNX Runtime's CPU provider.
const ToolBench = "vision_bench.py"

// BenchRuntime is a runtime that times a vision artifact. Its Tool is a
// script in the runtime's own toolchain that follows one protocol, so a
// format family plugs a runtime in by registering it (RegisterBenchRuntime)
// with a script of its own:
//
//	TOOL --model FILE --config DIR --warmup W --runs R --batch B --threads T
//
// builds one input of B images at the shape config.json (in DIR) and the
// model say, runs W+R single inferences of it, each timed alone, and
// prints one JSON line, report.Bench (vision_benchlib.py writes it):
//
//	{"latency_ns": [W+R numbers, warm-up first], "batch": B, "threads": T,
//	 "input_shape": [...], "input_dtype": "float32",
//	 "runtime_version": "onnxruntime 1.23.2 CPUExecutionProvider",
//	 "peak_rss_bytes": VmHWM, "rss_before_load_bytes": N,
//	 "rss_after_runs_bytes": N}
//
// rss_before_load_bytes is read once the runtime is imported and before
// the model is loaded; rss_after_runs_bytes after the last run.
type BenchRuntime struct {
	// Name is the runtime's name in bench params and manifests.
	Name string
	// Tool is the script that measures.
	Tool string
	// Formats are the vision formats it times (each format has one).
	Formats []string
}

// Bench runtimes, by name.
const (
	BenchONNXRuntime = "onnxruntime"
	BenchLiteRT      = "litert"
	BenchOpenVINO    = "openvino"
)

var benchRuntimes = struct {
	sync.RWMutex
	byName   map[string]BenchRuntime
	byFormat map[string]string
}{byName: map[string]BenchRuntime{}, byFormat: map[string]string{}}

// RegisterBenchRuntime makes a runtime available to vision targets'
// bench: steps; a runtime or a format registered twice is a programming
// error.
func RegisterBenchRuntime(r BenchRuntime) {
	benchRuntimes.Lock()
	defer benchRuntimes.Unlock()
	if _, dup := benchRuntimes.byName[r.Name]; dup || r.Tool == "" {
		panic("vision: bench runtime " + r.Name + " registered twice, or without a tool")
	}
	for _, f := range r.Formats {
		if old, dup := benchRuntimes.byFormat[f]; dup {
			panic("vision: format " + f + " already timed by " + old)
		}
		benchRuntimes.byFormat[f] = r.Name
	}
	benchRuntimes.byName[r.Name] = r
}

func init() {
	// Each format is timed in the runtime its gate scored it with.
	RegisterBenchRuntime(BenchRuntime{Name: BenchONNXRuntime, Tool: ToolBench, Formats: []string{FormatFP32, FormatInt8}})
	RegisterBenchRuntime(BenchRuntime{Name: BenchLiteRT, Tool: litert.ToolBench, Formats: []string{FormatTFLiteInt8}})
	RegisterBenchRuntime(BenchRuntime{Name: BenchOpenVINO, Tool: ToolOVBench, Formats: []string{FormatOpenVINOInt8}})
}

// benchRuntimeFor names the runtime that times format here, or false
// when none does (the family's TaskBench: recipes refuse bench: there).
func benchRuntimeFor(format string) (string, bool) {
	benchRuntimes.RLock()
	defer benchRuntimes.RUnlock()
	name, ok := benchRuntimes.byFormat[format]
	return name, ok
}

func benchRuntime(name string) (BenchRuntime, bool) {
	benchRuntimes.RLock()
	defer benchRuntimes.RUnlock()
	r, ok := benchRuntimes.byName[name]
	return r, ok
}

func benchRuntimeNames() []string {
	benchRuntimes.RLock()
	defer benchRuntimes.RUnlock()
	var out []string
	for n := range benchRuntimes.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// addBench adds the bench step of a target's model: targets with the same
// model and bench settings share one measurement. It measures whether or
// not the gate passes (it needs only the model): the decision table shows
// a failed target's cost beside its quality.
func addBench(t *recipe.Target, model *plan.Step, add plan.AddFunc) *plan.Step {
	rt, _ := benchRuntimeFor(t.Format)
	b := t.Bench
	params := &BenchParams{Runtime: rt, Warmup: b.Warmup, Runs: b.Runs, Batch: max(b.Batch, 1), Threads: b.Threads}
	var opts []string
	for _, o := range []struct {
		name     string
		val, def int
	}{
		{"batch", params.Batch, recipe.DefaultBenchBatch},
		{"runs", b.Runs, recipe.DefaultBenchRuns},
		{"threads", b.Threads, 0},
		{"warmup", b.Warmup, recipe.DefaultBenchWarmup},
	} {
		if o.val != o.def {
			opts = append(opts, fmt.Sprintf("%s=%d", o.name, o.val))
		}
	}
	id := "vision-bench:" + model.ID
	if len(opts) > 0 {
		id += "+" + strings.Join(opts, "+")
	}
	return add(&plan.Step{ID: id, Kind: KindBench, Needs: []string{model.ID}, Params: params, Pos: t.BenchPos}, t.Name)
}

// visionBench is the bench step's kind.
type visionBench struct{}

// BenchParams are a vision-bench step's.
type BenchParams struct {
	Runtime string `json:"runtime"`
	Warmup  int    `json:"warmup"`
	Runs    int    `json:"runs"`
	Batch   int    `json:"batch"`
	// Threads is the runtime's thread count; 0 means the cores the step
	// is granted (every core: it runs alone).
	Threads int `json:"threads"`
}

func (visionBench) Name() string   { return KindBench }
func (visionBench) Version() int   { return 2 } // 2: the host's load average, VmHWM
func (visionBench) NewParams() any { return &BenchParams{} }

// HostIdentity puts the machine in the cache key: the output is a
// measurement of it (see steps.HostBound).
func (visionBench) HostIdentity() string { return host.Identity() }

func (visionBench) Tools(p any) []string {
	if r, ok := benchRuntime(steps.ParamsOf[BenchParams](p).Runtime); ok {
		return []string{r.Tool}
	}
	return nil
}

func (visionBench) Resources(any) steps.Resources {
	// Every core, so the scheduler runs it alone: latency measured beside
	// a conversion measures the conversion. The runtime keeps its own
	// OpenMP wait policy, as a user running it would.
	return steps.Resources{Cores: runtime.NumCPU(), MemoryMB: 1024, ModelFactor: 4, OwnWaitPolicy: true}
}

func (visionBench) Run(ctx context.Context, sc *steps.Context) error {
	p := steps.ParamsOf[BenchParams](sc.Params)
	rt, ok := benchRuntime(p.Runtime)
	if !ok {
		return fmt.Errorf("step %s: runtime %q is not one the vision bench runs: %s", sc.StepID, p.Runtime, strings.Join(benchRuntimeNames(), ", "))
	}
	if p.Warmup < 0 || p.Runs < 1 || p.Batch < 1 {
		return fmt.Errorf("step %s: warmup %d, runs %d and batch %d must be >= 0, >= 1 and >= 1", sc.StepID, p.Warmup, p.Runs, p.Batch)
	}
	if len(sc.Inputs) == 0 || sc.Inputs[0].Result == nil || sc.Inputs[0].Result.Files["model"] == "" {
		return fmt.Errorf("step %s needs the step that made the model it times, which recorded no model file", sc.StepID)
	}
	in := sc.Inputs[0]
	modelBytes, err := shared.ArtifactBytes(in.Dir)
	if err != nil {
		return fmt.Errorf("step %s: size of %s: %w", sc.StepID, in.StepID, err)
	}
	threads := p.Threads
	if threads <= 0 {
		threads = sc.NumThreads()
	}
	load := loadAverage()
	if err := sc.RunTool(ctx, rt.Tool, "--model", filepath.Join(in.Dir, in.Result.Files["model"]), "--config", in.Dir,
		"--warmup", strconv.Itoa(p.Warmup), "--runs", strconv.Itoa(p.Runs), "--batch", strconv.Itoa(p.Batch),
		"--threads", strconv.Itoa(threads)); err != nil {
		return err
	}
	var res report.Bench
	if err := steps.ReadReport(rt.Tool, sc.LogPath, &res); err != nil {
		return err
	}
	vb, err := summarizeBench(res, p, threads)
	if err != nil {
		return fmt.Errorf("step %s: %s %w (see %s)", sc.StepID, rt.Tool, err, sc.LogPath)
	}
	vb.Runtime, vb.Host, vb.ModelBytes, vb.HostLoad1m = rt.Name, host.Identity(), modelBytes, load
	sc.Result.VisionBench = vb
	// The raw timings, warm-up runs included, so the summary can be
	// recomputed.
	raw, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(sc.Out, "samples.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	sc.Result.SetFile("samples", "samples.json")
	fmt.Fprintf(sc.Log, "vision-bench: %s, %d threads, batch %d %v: p50 %.3f ms, p95 %.3f, p99 %.3f; %.1f images/s; peak RSS %d MiB (+%d MiB over the runtime alone)\n",
		vb.RuntimeVersion, vb.Threads, vb.Batch, vb.InputShape, vb.LatencyP50MS, vb.LatencyP95MS, vb.LatencyP99MS, vb.ImagesPerS,
		vb.PeakRSSBytes>>20, vb.RSSGrowthBytes>>20)
	return nil
}

// summarizeBench checks a script's report against what it was asked for
// and turns its timings into the manifest's figures.
func summarizeBench(res report.Bench, p *BenchParams, threads int) (*manifest.VisionBench, error) {
	if want := p.Warmup + p.Runs; len(res.LatencyNS) != want {
		return nil, fmt.Errorf("reported %d timings, %d warm-up and %d timed runs were asked for", len(res.LatencyNS), p.Warmup, p.Runs)
	}
	if res.Batch != p.Batch || res.Threads != threads {
		return nil, fmt.Errorf("ran batch %d on %d threads, batch %d on %d were asked for", res.Batch, res.Threads, p.Batch, threads)
	}
	if len(res.InputShape) < 2 || res.InputShape[0] != p.Batch || slices.Min(res.InputShape) < 1 {
		return nil, fmt.Errorf("reported the input shape %v for a batch of %d", res.InputShape, p.Batch)
	}
	if res.PeakRSS <= 0 || res.RSSBeforeLoad <= 0 || res.RSSAfterRuns <= 0 || res.RuntimeVersion == "" {
		return nil, fmt.Errorf("reported no memory figures or runtime version (peak %d, before load %d, after runs %d, %q)",
			res.PeakRSS, res.RSSBeforeLoad, res.RSSAfterRuns, res.RuntimeVersion)
	}
	timed, err := benchstat.DropWarmup(res.LatencyNS, p.Warmup)
	if err != nil {
		return nil, err
	}
	l, err := benchstat.Summarize(timed)
	if err != nil {
		return nil, err
	}
	return &manifest.VisionBench{RuntimeVersion: res.RuntimeVersion, WarmupRuns: p.Warmup, TimedRuns: l.Count,
		Batch: res.Batch, InputShape: res.InputShape, InputDtype: res.InputDtype, Threads: res.Threads,
		LatencyP50MS: l.P50MS, LatencyP95MS: l.P95MS, LatencyP99MS: l.P99MS, MeanMS: l.MeanMS, MinMS: l.MinMS, MaxMS: l.MaxMS,
		ImagesPerS: l.TokensPerS(float64(res.Batch)), PeakRSSBytes: res.PeakRSS, RSSBeforeLoadBytes: res.RSSBeforeLoad,
		RSSGrowthBytes: res.RSSAfterRuns - res.RSSBeforeLoad}, nil
}

// loadAverage is the host's 1-minute load average (/proc/loadavg), or nil
// where the system does not say.
func loadAverage() *float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return nil
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v < 0 {
		return nil
	}
	return &v
}
