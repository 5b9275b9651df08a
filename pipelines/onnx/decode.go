package onnx

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// onnxDecode is the decode check of an ONNX model with its KV cache:
// onnx_decode.py runs it on ONNX Runtime's CPU provider as onnx_bench.py
// does, the present tensors of one run fed back as the next one's past,
// and decodes the generate-reference step's sequences token by token
// through them.
type onnxDecode struct{}

// ToolDecode is the decode check's helper, in the family's toolchain.
const ToolDecode = "onnx_decode.py"

// DecodeBounds are each format's decode consistency bound on ONNX
// Runtime's CPU provider: docs/results/decode.md has the measurements on
// the built-in model and on a past fed one position off. The bounds sit
// well above the first and far below the second; top-1 may flip only on
// a near tie.
var DecodeBounds = map[string]shared.DecodeBound{
	// The fp32 export: decode and prefill differ by the order of their
	// float32 sums only.
	"onnx-fp32": {MaxAbs: 1e-3, MinTop1: 0.99},
	// MatMulNBits as onnx_quantize.py writes it (no accuracy_level)
	// dequantizes its weights and multiplies in float32, for one token as
	// for a prompt: the same sums in another order, as for fp32.
	"onnx-int4": {MaxAbs: 1e-3, MinTop1: 0.99},
}

func (onnxDecode) Name() string       { return "onnx-decode" }
func (onnxDecode) Version() int       { return 1 }
func (onnxDecode) NewParams() any     { return &shared.DecodeParams{} }
func (onnxDecode) Tools(any) []string { return []string{ToolDecode} }
func (onnxDecode) Resources(any) steps.Resources {
	// ONNX Runtime's session of the model, a past of a few hundred
	// tokens and one prefill's logits.
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 400, ModelFactor: 2}
}

func (onnxDecode) Run(ctx context.Context, sc *steps.Context) error {
	// The model it decodes is its first need (expandONNX puts it there):
	// the export or the quantized model made of it.
	if len(sc.Inputs) == 0 || sc.Inputs[0].Result == nil || sc.Inputs[0].Result.Files["model"] == "" {
		return fmt.Errorf("step %s needs, first, the step that made the ONNX model it decodes", sc.StepID)
	}
	model := sc.Inputs[0]
	var format string
	switch model.Kind {
	case Export.Name():
		if model.Result.Facts["kv_cache"] != "true" {
			return fmt.Errorf("step %s decodes through the KV cache, but %s exported the graph without one (past: false)", sc.StepID, model.StepID)
		}
		format = "onnx-fp32"
	case onnxQuantize{}.Name():
		format = "onnx-int4"
	default:
		return fmt.Errorf("step %s decodes an ONNX export or its MatMulNBits model, not the output of %s (%s)", sc.StepID, model.StepID, model.Kind)
	}
	return shared.RunDecode(ctx, sc, shared.Decode{Tool: ToolDecode,
		Args: []string{"--onnx", filepath.Join(model.Dir, model.Result.Files["model"])}, Bound: DecodeBounds[format]})
}
