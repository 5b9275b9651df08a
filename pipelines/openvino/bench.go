package openvino

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"github.com/edgepipe/edgepipe/pipelines/openvino/report"
	"github.com/edgepipe/edgepipe/steps"
)

// BenchName is the OpenVINO bench backend's name in catalog rows and
// manifests. It times OpenVINO's CPU plugin on this host: an Intel NPU's
// speed is not measured here, and the manifest says CPU.
const BenchName = "openvino-cpu"

// ovBench runs openvino_bench.py: reps prompt runs and reps single-token
// decode steps against a KV cache (the IR's state) of the prompt's length.
type ovBench struct{}

func (ovBench) Name() string { return BenchName }
func (ovBench) Tool() string { return ToolBench }

func (ovBench) Measure(ctx context.Context, sc *steps.Context, model string, prompt, reps, threads int) (promptNS, decodeNS []float64, err error) {
	if err := sc.RunTool(ctx, ToolBench, "--ir", filepath.Dir(model), "--prompt-tokens", strconv.Itoa(prompt),
		"--runs", strconv.Itoa(reps), "--threads", strconv.Itoa(threads)); err != nil {
		return nil, nil, err
	}
	var res report.Bench
	if err := steps.ReadReport(ToolBench, sc.LogPath, &res); err != nil {
		return nil, nil, err
	}
	if res.Device != "CPU" {
		return nil, nil, fmt.Errorf("%s timed %q, not the CPU plugin it was asked for (see %s)", ToolBench, res.Device, sc.LogPath)
	}
	if len(res.PromptNS) != reps || len(res.DecodeNS) != reps {
		return nil, nil, fmt.Errorf("%s reported %d prompt and %d decode timings, %d runs were asked for (see %s)",
			ToolBench, len(res.PromptNS), len(res.DecodeNS), reps, sc.LogPath)
	}
	for _, v := range append(append([]float64{}, res.PromptNS...), res.DecodeNS...) {
		if !(v > 0) || math.IsInf(v, 0) {
			return nil, nil, fmt.Errorf("%s reported a timing of %v ns (see %s)", ToolBench, v, sc.LogPath)
		}
	}
	sc.Result.SetFact("bench_device", "host CPU (OpenVINO CPU plugin), not an NPU")
	sc.Result.SetFact("bench_inference_precision", res.InferencePrecision)
	return res.PromptNS, res.DecodeNS, nil
}
