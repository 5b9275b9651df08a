package llmcompressor

import (
	"context"

	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// llmcDecode is the decode check of a compressed-tensors checkpoint:
// llmc_decode.py loads it through transformers and compressed-tensors, as
// llmc-perplexity does, and decodes the generate-reference step's
// sequences token by token through transformers' KV cache, the closest
// host equivalent of vLLM's paged cache.
type llmcDecode struct{}

// ToolLLMCDecode is the decode check's helper, in the family's toolchain.
const ToolLLMCDecode = "llmc_decode.py"

// DecodeBound is the compressed-tensors checkpoint's decode consistency
// bound through transformers (float32 weights unpacked from INT4):
// docs/results/decode.md has the measurement, decode and prefill within
// 6e-5 of each other on the built-in model, and a cache fed one position
// off many units apart. The bound sits well above the first and far below
// the second; top-1 may flip only on a near tie.
var DecodeBound = shared.DecodeBound{MaxAbs: 1e-3, MinTop1: 0.99}

func (llmcDecode) Name() string       { return "llmc-decode" }
func (llmcDecode) Version() int       { return 1 }
func (llmcDecode) NewParams() any     { return &shared.DecodeParams{} }
func (llmcDecode) Tools(any) []string { return []string{ToolLLMCDecode} }
func (llmcDecode) Resources(any) steps.Resources {
	// llmc-perplexity's load (INT4 unpacked to fp32) with a KV cache of a
	// few hundred tokens and one step's logits.
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 236, ModelFactor: 2.77}
}

func (llmcDecode) Run(ctx context.Context, sc *steps.Context) error {
	model, err := sc.Input(llmcQuantize{})
	if err != nil {
		return err
	}
	return shared.RunDecode(ctx, sc, shared.Decode{Tool: ToolLLMCDecode, Args: []string{"--model", model.Dir}, Bound: DecodeBound})
}
