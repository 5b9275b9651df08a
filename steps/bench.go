package steps

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/edgepipe/edgepipe/internal/benchstat"
	"github.com/edgepipe/edgepipe/internal/host"
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

func init() { Register(bench{}) }

// Tools and backends of the bench step.
const (
	ToolLlamaBench = "llama-bench"
	ToolONNXBench  = "onnx_bench.py"

	BenchBackendLlamaCpp = "llama.cpp"
	BenchBackendONNX     = "onnxruntime"
)

// HostBound is implemented by kinds whose output is a measurement of the
// machine they ran on: the executor adds HostIdentity to their cache key.
type HostBound interface{ HostIdentity() string }

func (bench) Name() string         { return "bench" }
func (bench) Version() int         { return 1 }
func (bench) HostIdentity() string { return host.Identity() }

func (bench) Tools(p Params) []string {
	switch p.String("backend", "") {
	case BenchBackendLlamaCpp:
		return []string{ToolLlamaBench}
	case BenchBackendONNX:
		return []string{ToolONNXBench}
	}
	return nil
}

func (bench) Resources(p Params) Resources {
	// Every core, so the scheduler runs it alone: a measurement sharing
	// the cores with a conversion measures the conversion. Memory: the
	// bandwidth probe's buffer and the model loaded by its runtime.
	return Resources{Cores: runtime.NumCPU(), MemoryMB: int64(p.Int("probe_mib", 1024)) + 2048}
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

func (bench) Run(ctx context.Context, sc *Context) error {
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
	warmup, runs := sc.Params.Int("warmup", 10), sc.Params.Int("runs", 50)
	prompt := sc.Params.Int("prompt_tokens", 128)
	threads := sc.Params.Int("threads", 0)
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	if warmup < 0 || runs < 1 || prompt < 1 {
		return fmt.Errorf("step %s: warmup %d, runs %d and prompt_tokens %d must be >= 0, >= 1 and >= 1", sc.StepID, warmup, runs, prompt)
	}

	// The probe first: it needs the memory bus to itself, and the runtime
	// has not loaded the model yet.
	probe := int64(sc.Params.Int("probe_mib", 1024)) << 20
	bw, err := host.MemoryBandwidth(ctx, probe, 3)
	if err != nil {
		return fmt.Errorf("step %s: memory bandwidth probe: %w", sc.StepID, err)
	}
	fmt.Fprintf(sc.Log, "bench: memory bandwidth %.2f GB/s (best of %d passes over %d MiB, %d readers)\n",
		bw.GBs, bw.Passes, bw.Bytes>>20, bw.Readers)

	s := benchSamples{Host: host.Identity(), Threads: threads, PromptTokens: prompt, Warmup: warmup, Bandwidth: bw}
	backend := sc.Params.String("backend", "")
	switch backend {
	case BenchBackendLlamaCpp:
		s.PromptNS, s.DecodeNS, err = llamaBench(ctx, sc, modelPath, prompt, warmup+runs, threads)
	case BenchBackendONNX:
		s.PromptNS, s.DecodeNS, err = onnxBench(ctx, sc, modelPath, prompt, warmup+runs, threads)
	default:
		return fmt.Errorf("step %s: backend %q is not one the bench runs: %s or %s", sc.StepID, backend, BenchBackendLlamaCpp, BenchBackendONNX)
	}
	if err != nil {
		return err
	}
	s.Backend = backend
	if err := recordBench(sc.Result, s, warmup, modelBytes); err != nil {
		return fmt.Errorf("step %s: %w (see %s)", sc.StepID, err, sc.LogPath)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(sc.Out, "samples.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	sc.Result.SetFile("samples", "samples.json")
	return nil
}

// recordBench turns raw samples into the step's metrics: per-token decode
// latency percentiles, decode and prompt rates, time to first token (the
// median prompt run: the prompt's forward pass is what yields the first
// token's logits), and efficiency against bandwidth / model bytes.
func recordBench(r *Result, s benchSamples, warmup int, modelBytes int64) error {
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
	r.SetMetric("warmup_runs", float64(warmup))
	r.SetMetric("timed_runs", float64(d.Count))
	r.SetMetric("prompt_tokens", float64(s.PromptTokens))
	r.SetMetric("decode_tokens", float64(d.Count))
	r.SetMetric("threads", float64(s.Threads))
	r.SetMetric("token_p50_ms", d.P50MS)
	r.SetMetric("token_p95_ms", d.P95MS)
	r.SetMetric("token_p99_ms", d.P99MS)
	r.SetMetric("token_mean_ms", d.MeanMS)
	r.SetMetric("decode_tok_s", decode)
	r.SetMetric("first_token_ms", p.P50MS)
	r.SetMetric("prompt_tok_s", p.TokensPerS(float64(s.PromptTokens)))
	r.SetMetric("model_bytes", float64(modelBytes))
	r.SetMetric("host_bandwidth_gb_s", s.Bandwidth.GBs)
	if modelBytes > 0 {
		ceiling := s.Bandwidth.GBs * 1e9 / float64(modelBytes)
		r.SetMetric("host_ceiling_tok_s", ceiling)
		r.SetMetric("efficiency", decode/ceiling)
	}
	r.SetFact("backend", s.Backend)
	r.SetFact("host", s.Host)
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
		if rel, _ := filepath.Rel(dir, p); rel == ResultFile || rel == "step.log" {
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

// llamaBench times the prompt and the decode with llama-bench, in two
// runs of reps repetitions each, and returns every repetition's time:
//
//   - prompt: -p P -n 0, a P-token prompt from an empty KV cache;
//   - decode: -p 0 -n 1 -d P, one token generated with P tokens already
//     in the KV cache. llama-bench fills the cache once, restores it before
//     each repetition and starts the clock after the restore, so each
//     sample is exactly one decode step at depth P.
//
// llama-bench's own warm-up run (one prompt, one token) comes on top of
// the step's warm-up repetitions, which the caller drops.
func llamaBench(ctx context.Context, sc *Context, model string, prompt, reps, threads int) (promptNS, decodeNS []float64, err error) {
	common := []string{"-m", model, "-r", strconv.Itoa(reps), "-t", strconv.Itoa(threads), "-o", "jsonl"}
	if err := sc.RunTool(ctx, ToolLlamaBench, append(append([]string{}, common...), "-p", strconv.Itoa(prompt), "-n", "0")...); err != nil {
		return nil, nil, err
	}
	if err := sc.RunTool(ctx, ToolLlamaBench, append(append([]string{}, common...), "-p", "0", "-n", "1", "-d", strconv.Itoa(prompt))...); err != nil {
		return nil, nil, err
	}
	tests, err := readLlamaBenchTests(sc.LogPath)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range tests {
		switch {
		case t.NPrompt == prompt && t.NGen == 0 && t.NDepth == 0:
			promptNS = t.SamplesNS
		case t.NPrompt == 0 && t.NGen == 1 && t.NDepth == prompt:
			decodeNS = t.SamplesNS
		}
	}
	if promptNS == nil || decodeNS == nil {
		return nil, nil, fmt.Errorf("llama-bench printed no result for the prompt (pp%d) or the decode (tg1 at depth %d) test (see %s)", prompt, prompt, sc.LogPath)
	}
	if len(promptNS) != reps || len(decodeNS) != reps {
		return nil, nil, fmt.Errorf("llama-bench printed %d prompt and %d decode timings, %d repetitions were asked for (see %s)", len(promptNS), len(decodeNS), reps, sc.LogPath)
	}
	return promptNS, decodeNS, nil
}

// llamaBenchTest is one line of `llama-bench -o jsonl`.
type llamaBenchTest struct {
	NPrompt   int       `json:"n_prompt"`
	NGen      int       `json:"n_gen"`
	NDepth    int       `json:"n_depth"`
	NThreads  int       `json:"n_threads"`
	SamplesNS []float64 `json:"samples_ns"`
}

// readLlamaBenchTests reads every llama-bench JSONL result in a log, in
// order; the log also holds llama.cpp's own messages.
func readLlamaBenchTests(logPath string) ([]llamaBenchTest, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []llamaBenchTest
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) < 2 || line[0] != '{' || !bytes.Contains(line, []byte(`"samples_ns"`)) {
			continue
		}
		var t llamaBenchTest
		if err := json.Unmarshal(line, &t); err != nil {
			return nil, fmt.Errorf("a llama-bench result line does not parse: %w", err)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", logPath, err)
	}
	return out, nil
}

// onnxBench runs onnx_bench.py: reps prompt runs and reps single-token
// decode steps against a KV cache of the prompt's length, with ONNX
// Runtime's CPU provider.
func onnxBench(ctx context.Context, sc *Context, model string, prompt, reps, threads int) (promptNS, decodeNS []float64, err error) {
	if err := sc.RunTool(ctx, ToolONNXBench, "--onnx", model, "--prompt-tokens", strconv.Itoa(prompt),
		"--runs", strconv.Itoa(reps), "--threads", strconv.Itoa(threads)); err != nil {
		return nil, nil, err
	}
	var res struct {
		PromptNS  []float64 `json:"prompt_ns"`
		DecodeNS  []float64 `json:"decode_ns"`
		Providers []string  `json:"providers"`
	}
	if err := ReadJSONLine(sc.LogPath, &res); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", ToolONNXBench, err)
	}
	if len(res.PromptNS) != reps || len(res.DecodeNS) != reps {
		return nil, nil, fmt.Errorf("%s reported %d prompt and %d decode timings, %d runs were asked for (see %s)",
			ToolONNXBench, len(res.PromptNS), len(res.DecodeNS), reps, sc.LogPath)
	}
	for _, v := range append(append([]float64{}, res.PromptNS...), res.DecodeNS...) {
		if !(v > 0) || math.IsInf(v, 0) {
			return nil, nil, fmt.Errorf("%s reported a timing of %v ns (see %s)", ToolONNXBench, v, sc.LogPath)
		}
	}
	return res.PromptNS, res.DecodeNS, nil
}
