package openvino

import (
	"context"

	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// ovDecode is the decode check of a stateful IR: openvino_decode.py runs
// it on OpenVINO's CPU plugin as openvino_bench.py does, the state reset
// and the prompt fed whole, then one token at a time through the KV cache
// in the model's state, and decodes the generate-reference step's
// sequences so. The plugin computes in f32 with an f32 cache and no
// on-the-fly quantization of activations (its x86 defaults quantize both,
// a token decoded alone otherwise than a prompt), so what is checked is
// the IR's decode path.
type ovDecode struct{}

// ToolDecode is the decode check's helper, in the family's toolchain.
const ToolDecode = "openvino_decode.py"

// DecodeBound is the stateful IR's decode consistency bound on the CPU
// plugin in f32, INT4 and INT8 alike: docs/results/decode.md has the
// measurements on the built-in model and on a state fed one position off.
// The bound sits well above the first and far below the second (wider
// than ONNX Runtime's: the plugin's f32 kernels, chosen by the host's
// instruction set, put decode and prefill further apart); top-1 may flip
// only on a near tie.
var DecodeBound = shared.DecodeBound{MaxAbs: 1e-2, MinTop1: 0.99}

func (ovDecode) Name() string       { return "openvino-decode" }
func (ovDecode) Version() int       { return 1 }
func (ovDecode) NewParams() any     { return &shared.DecodeParams{} }
func (ovDecode) Tools(any) []string { return []string{ToolDecode} }
func (ovDecode) Resources(any) steps.Resources {
	// The compiled model, its f32 state of a few hundred tokens and one
	// prefill's logits.
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 500, ModelFactor: 1}
}

func (ovDecode) Run(ctx context.Context, sc *steps.Context) error {
	model, err := sc.Input(ovQuantize{})
	if err != nil {
		return err
	}
	return shared.RunDecode(ctx, sc, shared.Decode{Tool: ToolDecode, Args: []string{"--ir", model.Dir}, Bound: DecodeBound})
}
