package mlc

import (
	"context"

	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// mlcDecode is the decode check of an MLC model's weights: mlc_decode.py
// reads the published shards back and dequantizes them into the
// unconverted model exactly as mlc-gate does (the reference implementation
// of MLC's kernels in PyTorch, float32), then decodes the generate-reference
// step's sequences token by token through transformers' KV cache. WebLLM's
// own paged cache and float16 kernels are not what runs here.
type mlcDecode struct{}

// ToolDecode is the decode check's helper, in the llama toolchain.
const ToolDecode = "mlc_decode.py"

// DecodeBound is the MLC shards' decode consistency bound through the
// gate's reference implementation (float32): docs/results/decode.md has
// the measurement, decode and prefill within 7e-5 of each other on the
// built-in model in both quantizations, and a cache fed one position off
// many units apart. The bound sits well above the first and far below the
// second; top-1 may flip only on a near tie.
var DecodeBound = shared.DecodeBound{MaxAbs: 1e-3, MinTop1: 0.99}

func (mlcDecode) Name() string       { return "mlc-decode" }
func (mlcDecode) Version() int       { return 1 }
func (mlcDecode) NewParams() any     { return &shared.DecodeParams{} }
func (mlcDecode) Tools(any) []string { return []string{ToolDecode} }
func (mlcDecode) Resources(any) steps.Resources {
	// mlc-gate's load (the fp32 model and its decoded weights) with a KV
	// cache of a few hundred tokens and one step's logits.
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 1000, ModelFactor: 2.5}
}

func (mlcDecode) Run(ctx context.Context, sc *steps.Context) error {
	weights, err := firstInput(sc, mlcNativeConvert{}, mlcConvertWeight{})
	if err != nil {
		return err
	}
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	return shared.RunDecode(ctx, sc, shared.Decode{Tool: ToolDecode, Args: []string{"--mlc", weights.Dir, "--model", src.Dir}, Bound: DecodeBound})
}
