package runreport

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/steps"
)

// llmRecipe has a target for every way a run can end for it.
const llmRecipe = `edgepipe: 1
name: llm
model: {source: "https://user:hunter2@example.com/m.gguf"}
targets:
  a: {device: x86-laptop, format: gguf-q4_k_m, bench: {}}
  b: {device: x86-laptop, format: gguf-q8_0}
  c: {device: x86-laptop, format: gguf-q5_0}
  d: {device: x86-laptop, format: gguf-q4_0}
  e: {device: x86-laptop, format: gguf-q4_1}
`

// scenario is a finished run of llmRecipe: a published with a gate, a
// bench and two pushes (one failed); b failed its gate; fail-fast stopped
// c after d's quantize step failed; e was never reached.
type scenario struct {
	pl  *plan.Plan
	rec *Recorder
	res *engine.RunResult
	out string // the run's output folder
	log string // the failed step's log
}

const quantizeFailure = "llama-quantize exited with code 1\nusage: llama-quantize MODEL TYPE"

func llmScenario(t *testing.T) scenario {
	t.Helper()
	pl := loadPlan(t, llmRecipe)
	out := t.TempDir()
	log := filepath.Join(out, "q4_0.log")
	if err := os.WriteFile(log, []byte("loading model\nerror: tensor\x07 blk.3 has no data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := New(pl)
	rec.OutDir, rec.Version = out, "1.2.3"
	for _, ev := range []event.Event{
		{Type: event.Cached, Step: plan.SourceStepID, Kind: "fetch"},
		{Type: event.Started, Step: "gguf-quantize:q4_0", Kind: "gguf-quantize", Path: log},
		{Type: event.Log, Step: "gguf-quantize:q4_0", Message: "rebuilding a corrupt input"},
		{Type: event.Failed, Step: "gguf-quantize:q4_0", Kind: "gguf-quantize", Seconds: 2.5, Message: quantizeFailure},
		{Type: event.Started, Step: "publish:a", Kind: "publish"},
		{Type: event.Finished, Step: "publish:a", Kind: "publish", Seconds: 1.25},
		{Type: event.Pushed, Step: "publish:a", Target: "a", Path: "oci://registry.example/llm:a@sha256:1111"},
		{Type: event.PushFailed, Step: "publish:a", Target: "a", Path: "s3://bucket/llm/a"},
		{Type: event.Started, Step: "publish:b", Kind: "publish"},
		{Type: event.Gate, Step: "publish:b", Target: "b", Message: "fail"},
	} {
		rec.Event(ev)
	}
	gateA := &publish.GateResult{Target: "a", Baseline: 10, Converted: 10.25, Delta: 0.25, WarnDelta: 0.5, MaxDelta: 2, Verdict: manifest.VerdictExcellent}
	gateB := &publish.GateResult{Target: "b", Baseline: 10, Converted: 13, Delta: 3, WarnDelta: 0.5, MaxDelta: 2, Verdict: manifest.VerdictFail}
	publishFolder(t, filepath.Join(out, "a"), "a", map[string]string{
		"model.gguf": "weights", "logs/gguf-quantize_q4_k_m.log": "ok\n", "README.md": "readme",
	}, manifest.Manifest{Metrics: manifest.Metrics{SizeBytes: ptr[int64](3 << 20), KLDivergence: ptr(0.03)}})
	res := &engine.RunResult{
		Outputs: map[string]*steps.Output{
			plan.SourceStepID: {Result: &steps.Result{Revision: "0123abcd"}},
			"bench:gguf-quantize:q4_k_m": {Result: &steps.Result{Bench: &manifest.Bench{Backend: "llama.cpp", Host: "linux/amd64", Threads: 2,
				ModelBytes: 3 << 20, DecodeTokS: 41.5, TokenP50MS: 24, TokenP95MS: 26.5, TokenP99MS: 30, FirstTokenMS: 150, PromptTokens: 64, PromptTokS: 700,
				HostBandwidthGBs: ptr(6.5), HostCeilingTokS: ptr(62.0), Efficiency: ptr(41.5 / 62)}}},
		},
		Published: map[string]string{"a": filepath.Join(out, "a")},
		Gates:     map[string]*publish.GateResult{"a": gateA, "b": gateB},
		Failed: []error{
			&publish.GateError{Target: "b", Gate: gateB},
			&engine.StepError{Step: "gguf-quantize:q4_0", LogPath: log, Err: errors.New(quantizeFailure)},
		},
		Skipped: []string{"perplexity:q4_0", "publish:c", "publish:d"},
		Stopped: map[string]string{"publish:c": "gguf-quantize:q4_0"},
	}
	return scenario{pl: pl, rec: rec, res: res, out: out, log: log}
}
