package onnx

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/edgepipe/edgepipe/pipelines/onnx/report"
	"github.com/edgepipe/edgepipe/steps"
)

// Measure runs onnx_bench.py: reps prompt runs and reps single-token
// decode steps against a KV cache of the prompt's length, with ONNX
// Runtime's CPU provider.
// onnxBench is the ONNX Runtime bench backend.
type onnxBench struct{}

func (onnxBench) Name() string { return "onnxruntime" }
func (onnxBench) Tool() string { return ToolBench }

func (onnxBench) Measure(ctx context.Context, sc *steps.Context, model string, prompt, reps, threads int) (promptNS, decodeNS []float64, err error) {
	if err := sc.RunTool(ctx, ToolBench, "--onnx", model, "--prompt-tokens", strconv.Itoa(prompt),
		"--runs", strconv.Itoa(reps), "--threads", strconv.Itoa(threads)); err != nil {
		return nil, nil, err
	}
	var res report.Bench
	if err := steps.ReadReport(ToolBench, sc.LogPath, &res); err != nil {
		return nil, nil, err
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
	return res.PromptNS, res.DecodeNS, nil
}
