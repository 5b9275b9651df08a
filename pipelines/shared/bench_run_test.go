package shared

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/host"
	"github.com/edgepipe/edgepipe/steps"
)

// fakeBackend times nothing: it returns fixed timings and records what
// it was asked to measure.
type fakeBackend struct {
	name  string
	calls *[]benchCall
	err   error
}

type benchCall struct {
	model                 string
	prompt, reps, threads int
}

func (b fakeBackend) Name() string { return b.name }
func (b fakeBackend) Tool() string { return b.name + "-tool" }
func (b fakeBackend) Measure(_ context.Context, _ *steps.Context, model string, prompt, reps, threads int) ([]float64, []float64, error) {
	*b.calls = append(*b.calls, benchCall{model, prompt, reps, threads})
	if b.err != nil {
		return nil, nil, b.err
	}
	var pre, dec []float64
	for i := range reps {
		pre = append(pre, float64(100+i)*1e6)
		dec = append(dec, float64(10+i)*1e6)
	}
	return pre, dec, nil
}

var (
	benchCalls   []benchCall
	failingCalls []benchCall
)

func init() {
	RegisterBenchBackend(fakeBackend{name: "fake-rt", calls: &benchCalls})
	RegisterBenchBackend(fakeBackend{name: "failing-rt", calls: &failingCalls, err: errors.New("the runtime crashed")})
}

// modelInput is a model step's output: a 1000-byte model file beside the
// step's own record and log, which are not the model.
func modelInput(t *testing.T) steps.Input {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"model.gguf": strings.Repeat("m", 1000), steps.ResultFile: "{}", "step.log": "log"})
	return steps.Input{StepID: "quantize:q4", Kind: "gguf-quantize", Dir: dir, Result: &steps.Result{Files: map[string]string{"model": "model.gguf"}}}
}

func TestBenchRun(t *testing.T) {
	benchCalls = nil
	in := modelInput(t)
	f := newFakeStep(t, &BenchParams{Backend: "fake-rt", Warmup: 1, Runs: 3, PromptTokens: 64, Threads: 3, ProbeMiB: 1}, in)
	if err := (bench{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	if want := []benchCall{{filepath.Join(in.Dir, "model.gguf"), 64, 4, 3}}; !slices.Equal(benchCalls, want) {
		t.Errorf("measured %+v, want %+v", benchCalls, want)
	}
	r := f.sc.Result
	b := r.Bench
	if b == nil || b.Backend != "fake-rt" || b.Host != host.Identity() || b.WarmupRuns != 1 || b.TimedRuns != 3 || b.Threads != 3 ||
		b.PromptTokens != 64 || b.ModelBytes != 1000 || b.TokenP50MS != 12 || b.FirstTokenMS != 102 {
		t.Errorf("bench %+v", b)
	}
	if b != nil && (b.HostBandwidthGBs == nil || !(*b.HostBandwidthGBs > 0) || b.Efficiency == nil) {
		t.Errorf("no bandwidth or efficiency: %+v", b)
	}
	if _, ok := r.Metrics[MetricBandwidthProbeSeconds]; !ok {
		t.Errorf("metrics %v lack %s", r.Metrics, MetricBandwidthProbeSeconds)
	}
	if !strings.Contains(f.logText(), "bench: memory bandwidth") {
		t.Errorf("log %q", f.logText())
	}
	if r.Files["samples"] != "samples.json" {
		t.Errorf("files %v", r.Files)
	}
	raw, err := os.ReadFile(filepath.Join(f.sc.Out, "samples.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s benchSamples
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	// The raw samples keep the warm-up run, so the summary can be redone.
	if s.Backend != "fake-rt" || s.Warmup != 1 || len(s.DecodeNS) != 4 || len(s.PromptNS) != 4 || s.DecodeNS[0] != 10e6 ||
		s.Threads != 3 || s.PromptTokens != 64 || s.Host != host.Identity() || s.Bandwidth.Bytes != 1<<20 {
		t.Errorf("samples %+v", s)
	}
}

// Threads 0 means every core, for the runtime and the record alike.
func TestBenchRunDefaultsToEveryCore(t *testing.T) {
	benchCalls = nil
	f := newFakeStep(t, &BenchParams{Backend: "fake-rt", Runs: 1, PromptTokens: 8, ProbeMiB: 1}, modelInput(t))
	if err := (bench{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	if len(benchCalls) != 1 || benchCalls[0].threads != runtime.NumCPU() || benchCalls[0].reps != 1 || f.sc.Result.Bench.Threads != runtime.NumCPU() {
		t.Errorf("calls %+v, bench %+v", benchCalls, f.sc.Result.Bench)
	}
}

func TestBenchRunRefusals(t *testing.T) {
	ok := BenchParams{Backend: "fake-rt", Warmup: 1, Runs: 2, PromptTokens: 8, ProbeMiB: 1}
	noFile := modelInput(t)
	noFile.Result = &steps.Result{}
	noResult := modelInput(t)
	noResult.Result = nil
	for _, tc := range []struct {
		name    string
		p       BenchParams
		inputs  []steps.Input
		wantErr string
		measure bool
	}{
		{name: "no model step", p: ok, wantErr: "step step needs the model step whose output it measures"},
		{name: "no model file", p: ok, inputs: []steps.Input{noFile}, wantErr: "quantize:q4 recorded no model file to measure"},
		{name: "no result", p: ok, inputs: []steps.Input{noResult}, wantErr: "recorded no model file"},
		{name: "negative warm-up", p: BenchParams{Backend: "fake-rt", Warmup: -1, Runs: 2, PromptTokens: 8, ProbeMiB: 1}, wantErr: "warmup -1, runs 2 and prompt_tokens 8 must be >= 0, >= 1 and >= 1"},
		{name: "no runs", p: BenchParams{Backend: "fake-rt", Runs: 0, PromptTokens: 8, ProbeMiB: 1}, wantErr: "runs 0"},
		{name: "no prompt", p: BenchParams{Backend: "fake-rt", Runs: 1, PromptTokens: 0, ProbeMiB: 1}, wantErr: "prompt_tokens 0"},
		{name: "probe too small", p: BenchParams{Backend: "fake-rt", Runs: 1, PromptTokens: 8}, wantErr: "memory bandwidth probe: bandwidth probe of 0 bytes is too small"},
		{name: "unknown backend", p: BenchParams{Backend: "tflite", Runs: 1, PromptTokens: 8, ProbeMiB: 1}, wantErr: `backend "tflite" is not one the bench runs: failing-rt, fake-rt`},
		{name: "runtime fails", p: BenchParams{Backend: "failing-rt", Runs: 1, PromptTokens: 8, ProbeMiB: 1}, wantErr: "the runtime crashed", measure: true},
	} {
		inputs := tc.inputs
		if inputs == nil && tc.name != "no model step" {
			inputs = []steps.Input{modelInput(t)}
		}
		benchCalls, failingCalls = nil, nil
		p := tc.p
		f := newFakeStep(t, &p, inputs...)
		err := (bench{}).Run(context.Background(), f.sc)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
		if measured := len(benchCalls)+len(failingCalls) > 0; measured != tc.measure {
			t.Errorf("%s: measured %v, want %v", tc.name, measured, tc.measure)
		}
		if _, err := os.Stat(filepath.Join(f.sc.Out, "samples.json")); err == nil {
			t.Errorf("%s: samples written for a failed bench", tc.name)
		}
	}
}

func TestBenchKind(t *testing.T) {
	if got := (bench{}).Tools(&BenchParams{Backend: "fake-rt"}); !slices.Equal(got, []string{"fake-rt-tool"}) {
		t.Errorf("tools %v", got)
	}
	if got := (bench{}).Tools(&BenchParams{Backend: "nope"}); got != nil {
		t.Errorf("an unknown backend's tools: %v", got)
	}
	r := (bench{}).Resources(&BenchParams{ProbeMiB: 512})
	if r.Cores != runtime.NumCPU() || r.MemoryMB != 512+2048 || !r.OwnWaitPolicy {
		t.Errorf("resources %+v", r)
	}
	// Its result describes this host: the host is in its cache key.
	hb, ok := steps.Kind(bench{}).(steps.HostBound)
	if !ok || hb.HostIdentity() != host.Identity() {
		t.Error("bench is not host-bound")
	}
	defer func() {
		if recover() == nil {
			t.Error("a second backend of one name was registered")
		}
	}()
	RegisterBenchBackend(fakeBackend{name: "fake-rt", calls: &benchCalls})
}

// Without a model size there is no ceiling to measure efficiency against.
func TestRecordBenchWithoutModelBytes(t *testing.T) {
	s := benchSamples{PromptTokens: 10, PromptNS: []float64{1e6, 2e6}, DecodeNS: []float64{1e6, 2e6}, Bandwidth: host.Bandwidth{GBs: 3}}
	var r steps.Result
	if err := recordBench(&r, s, 0, 0); err != nil {
		t.Fatal(err)
	}
	if r.Bench.HostCeilingTokS != nil || r.Bench.Efficiency != nil || r.Bench.HostBandwidthGBs == nil || *r.Bench.HostBandwidthGBs != 3 {
		t.Errorf("%+v", r.Bench)
	}
	for _, tc := range []struct {
		s       benchSamples
		wantErr string
	}{
		{benchSamples{PromptNS: []float64{1e6}, DecodeNS: []float64{1e6, 2e6}}, "prompt timings"},
		{benchSamples{PromptNS: []float64{1e6, 2e6}, DecodeNS: []float64{1e6}}, "decode timings"},
		{benchSamples{PromptNS: []float64{1e6, 2e6}, DecodeNS: []float64{1e6, 0}}, "decode timings: sample 0 is 0 ns"},
		{benchSamples{PromptNS: []float64{1e6, -1}, DecodeNS: []float64{1e6, 2e6}}, "prompt timings: sample 0 is -1 ns"},
	} {
		if err := recordBench(&steps.Result{}, tc.s, 1, 1); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.wantErr)
		}
	}
}
