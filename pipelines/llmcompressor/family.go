// Package llmcompressor is the GPTQ and AWQ format family (CUDA/ROCm GPUs
// through vLLM): llmcompressor's oneshot quantizes a checkpoint's linear
// layers to INT4 (W4A16) on the CPU, calibrated on the recipe's text, into the
// compressed-tensors checkpoint vLLM loads, gated by its perplexity through
// transformers against the unconverted model on the same tokens, and by its
// token-by-token decode through transformers' KV cache against its own
// prefill and the unconverted model's greedy generations.
package llmcompressor

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

// Toolchain is the family's Python environment: llmcompressor 0.14 pins
// transformers 5.x and a matching compressed-tensors, which conflicts with
// the llama toolchain's transformers 4.57.
const Toolchain = "llmcompressor"

// Family is the GPTQ and AWQ family, for registration.
func Family() plan.Family {
	return plan.Family{
		Name: "llmcompressor",
		Formats: catalog.FormatSet{
			Labels: map[string]string{"gptq": "GPTQ", "awq": "AWQ"},
			Formats: []catalog.Format{
				{Name: "gptq-w4a16", Family: "gptq", BitsPerWeight: 4.125, BlockSize: 128, RunsHere: "yes",
					Note: "llmcompressor GPTQ, group 128 (a group must divide every layer's width); runs on the CPU for small models, vLLM serving itself is not exercised here"},
				{Name: "awq-w4a16", Family: "awq", BitsPerWeight: 4.156, BlockSize: 128, RunsHere: "yes",
					Note: "llmcompressor AWQ, group 128 with an fp16 scale and 4-bit zero point per group; runs on the CPU for small models, vLLM serving itself is not exercised here"},
			},
		},
		Options: options,
		Expand:  expandLLMCompressor,
		Refuses: refuses,
		Kinds:   []steps.Kind{llmcQuantize{}, llmcPerplexity{}, llmcDecode{}},
		Helpers: toolchain.Dir(python, "python"),
		Toolchains: []toolchain.Spec{toolchain.Python(Toolchain, locks, []string{ToolLLMCQuantize, ToolLLMCPerplexity, ToolLLMCDecode},
			"llmcompressor, compressed-tensors and transformers 5 for GPTQ and AWQ INT4 (W4A16) on the CPU, and perplexity and decode checks of the result").
			WithPackages("python", "llmcompressor", "compressed-tensors", "torch", "transformers")},
	}
}

// Options are the with: options of every llmcompressor target.
type Options struct {
	GroupSize             *int    `yaml:"group_size" min:"1" doc:"Input columns sharing one scale (default: the largest of 128, 64 and 32 that divides every linear layer's input width)."`
	NumCalibrationSamples *int    `yaml:"num_calibration_samples" min:"1" doc:"Calibration windows taken from the recipe's calibration text (default 32)."`
	MaxSeqLength          *int    `yaml:"max_seq_length" min:"8" doc:"Tokens per calibration window (default 512)."`
	Symmetric             *bool   `yaml:"symmetric" doc:"Symmetric 4-bit weights, without zero points (default false: a zero point per group, the W4A16_ASYM preset; vLLM's kernels take both)."`
	Observer              *string `yaml:"observer" enum:"minmax,mse" doc:"How each group's range is chosen: minmax (the group's min and max; AWQ's default) or mse (searches a clipped range that minimises the rounding error; GPTQ's default)."`
	VDownBits             *int    `yaml:"v_down_bits" enum:"4,8" doc:"Bits of every layer's v_proj and down_proj (default 8: a second config group at 8 bits with the same groups and zero points, as llama.cpp's Q4_K_M gives attn_v and ffn_down more bits; vLLM loads mixed 4/8-bit compressed-tensors checkpoints). Layers named otherwise stay at 4 bits."`
}

// GPTQOptions are a GPTQ target's with: options.
type GPTQOptions struct {
	Options  `yaml:",inline"`
	ActOrder *string `yaml:"actorder" enum:"static,group,none" doc:"GPTQ's activation ordering: static (default: columns solved in order of activation size, no runtime cost), group (also reorders the groups, stored as g_idx) or none."`
}

// AWQOptions are an AWQ target's with: options.
type AWQOptions struct {
	Options  `yaml:",inline"`
	NGrid    *int    `yaml:"n_grid" min:"3" doc:"AWQ's number of candidate scales per layer (default 20, AWQModifier's own; at least 3: with its default duo scaling, llmcompressor 0.14 divides by n_grid - 2)."`
	Rounding *string `yaml:"rounding" enum:"gptq,rtn" doc:"How the weights AWQ rescaled are rounded to 4 bits: gptq (default: llmcompressor's GPTQModifier after the AWQ transform, error feedback column by column) or rtn (round to nearest, QuantizationModifier)."`
}

// CheckOptions refuses a v_down_bits other than 4 or 8 when the recipe is
// loaded: the recipe does not hold integer options to their enum tag, and
// llmc-quantize would refuse it only once the plan runs.
func (o *Options) CheckOptions() []recipe.OptionProblem {
	if o.VDownBits != nil && *o.VDownBits != 4 && *o.VDownBits != 8 {
		return []recipe.OptionProblem{{Key: "v_down_bits", Msg: fmt.Sprintf("is %d, which is not one of its values", *o.VDownBits), Hint: "use 4 or 8"}}
	}
	return nil
}

func options(format string) any {
	if format == "awq-w4a16" {
		return &AWQOptions{}
	}
	return &GPTQOptions{}
}

// refuses: AWQ smooths each norm against the layers that read it, by
// mappings per model class; llmcompressor 0.14 has none for Mixtral, and
// its default mappings rescale post_attention_layernorm without the
// router that also reads it, so the experts each token goes to change.
// GPTQ quantizes each linear layer alone and takes any architecture.
func refuses(format, arch string) string {
	if arch == "qwen3_moe" {
		// Measured by the archs benchmark on builtin:tiny-qwen3-moe: both
		// formats quantized, then llmc-decode could not load the result.
		return "its W4A16 checkpoint does not load back into transformers 5.17 (compressed-tensors' DecompressExperts stops with \"Asymmetric quant requires zero-point values\"), so it can be neither checked nor served by transformers"
	}
	if format == "awq-w4a16" && arch == "mixtral" {
		return "llmcompressor 0.14 has no AWQ mappings for Mixtral: its default ones rescale the norm before the router without compensating it, which changes the routing (gptq-w4a16 takes Mixtral)"
	}
	return ""
}
