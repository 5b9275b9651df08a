// Package onnx is the ONNX format family: optimum-onnx exports a Hugging
// Face checkpoint to an fp32 graph with its KV cache, ONNX Runtime's
// weight-only quantizer makes the 4-bit MatMulNBits model, and ONNX Runtime's
// CPU provider gates both (logits against PyTorch, perplexity against the
// transformers baseline on the same tokens, a token-by-token decode through
// the past key/values against its prefill and the unconverted model's greedy
// generations) and times them on this host.
// The QNN family builds on its export and validation steps.
package onnx

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

// Toolchain is the Python environment of the ONNX and QNN families.
const Toolchain = "onnx"

// Tools of the onnx toolchain (tool names are global across toolchains).
const (
	ToolExport   = "onnx_export.py"
	ToolQuantize = "onnx_quantize.py"
	ToolValidate = "onnx_validate.py"
	ToolBench    = "onnx_bench.py"
)

// Family is the ONNX family, for registration.
func Family() plan.Family {
	return plan.Family{
		Name: "onnx",
		Formats: catalog.FormatSet{
			Labels: map[string]string{"onnx": "ONNX"},
			Formats: []catalog.Format{
				{Name: "onnx-fp32", Family: "onnx", BitsPerWeight: 32, RunsHere: "yes", Bench: "onnxruntime",
					Note: "exported ONNX graph; ONNX Runtime's CPU provider computes perplexity"},
				{Name: "onnx-int4", Family: "onnx", BitsPerWeight: 4.5, BlockSize: 32, RunsHere: "yes", Bench: "onnxruntime",
					Note: "MatMulNBits INT4 (ONNX Runtime's HQQ weight-only quantizer, block 32, a zero point per block); embeddings stay at full precision, so small models come out larger than 4.5 bits per weight suggests"},
			},
		},
		Options: options,
		Expand:  expandONNX,
		Refuses: func(_, arch string) string { return ExportRefuses(arch) },
		Kinds:   []steps.Kind{onnxExport{}, onnxQuantize{}, onnxValidate{}, onnxDecode{}},
		Helpers: toolchain.Dir(python, "python"),
		Toolchains: []toolchain.Spec{toolchain.Python(Toolchain, locks, []string{ToolExport, ToolQuantize, ToolValidate, ToolBench, ToolDecode},
			"optimum-onnx, ONNX Runtime (CPU) and its quantizers for ONNX and QNN QDQ; qai-hub's client is installed, "+
				"but its compile jobs were not run here: they need a Qualcomm AI Hub account (QAI_HUB_API_TOKEN)").
			WithPackages("python", "onnxruntime", "onnx", "optimum-onnx", "torch", "transformers")},
		Bench: onnxBench{},
	}
}

// ExportOptions are the options of every format built from the onnx
// family's export (onnx-fp32, and the QNN formats).
type ExportOptions struct {
	Opset           *int     `yaml:"opset" min:"17" doc:"The ONNX opset of the export (default 18; at least 17, which LayerNormalization and ONNX Runtime's attention fusions need)."`
	MaxAbsLogitDiff *float64 `yaml:"max_abs_logit_diff" min:"0" doc:"The largest |logit difference| against PyTorch on the first evaluation chunk the logits check accepts (a gate: over it fails the target)."`
}

// Int4Options are onnx-int4's options.
type Int4Options struct {
	ExportOptions `yaml:",inline"`
	Method        *string `yaml:"method" enum:"hqq,rtn" doc:"How the 4-bit weights are chosen: hqq (the default: ONNX Runtime's Half-Quadratic Quantization, which fits each block's scale and zero point to minimise the weights' error, data-free) or rtn (round-to-nearest, symmetric unless symmetric: false)."`
	BlockSize     *int    `yaml:"block_size" min:"16" doc:"Weights sharing one MatMulNBits scale (default 32, which divides every width of the built-in model); a power of two of at least 16."`
	Symmetric     *bool   `yaml:"symmetric" doc:"With method: rtn, quantize symmetrically, without zero points (default true). HQQ always stores a zero point per block."`
	KeepLMHead    *bool   `yaml:"keep_lm_head" doc:"Leave the output projection (lm_head) in float (default false)."`
	VDownBits     *int    `yaml:"v_down_bits" enum:"4,8" doc:"Bits of every layer's v_proj and down_proj (default 8, round to nearest with a zero point per block; llama.cpp's Q4_K_M likewise gives attn_v and ffn_down 6 bits in most layers). On Gemma 3 270M, with lm_head_bits 8, perplexity went from +3.34 to +1.97 (8 x 256 tokens) for 11 MB; layers named otherwise stay at 4 bits, and the step's fact says how many went to 8."`
	LMHeadBits    *int    `yaml:"lm_head_bits" enum:"4,8" doc:"Bits of the output projection's MatMulNBits weights (default 8, round to nearest with a zero point per block; llama.cpp's 4-bit types likewise keep the output tensor at 6-8 bits). On Gemma 3 270M, whose 262K-token output projection is 60% of its weights, 8 instead of 4 took perplexity from +4.70 to +3.34 (8 x 256 tokens) for 65 MiB more. A tied projection exported as a Transpose of the embedding's table (SmolLM2's) has no constant to pack and stays in float either way."`
}

// Default widths in onnx-int4 of the output projection and of the value
// and down projections; the other MatMuls take 4 bits.
const (
	DefaultLMHeadBits = 8
	DefaultVDownBits  = 8
)

// Quantization methods of onnx-int4.
const (
	MethodHQQ = "hqq"
	MethodRTN = "rtn"
)

// method is the target's quantization method.
func (o *Int4Options) method() string {
	if o.Method == nil {
		return MethodHQQ
	}
	return *o.Method
}

// CheckOptions refuses symmetric: with HQQ, whose zero points are what
// it optimises, and lm_head_bits beside keep_lm_head, which leaves the
// output projection in float, rather than silently ignoring either; and
// widths other than 4 and 8, which the recipe's enum tags do not hold
// integers to and the quantizer's flags refuse only after the export.
func (o *Int4Options) CheckOptions() []recipe.OptionProblem {
	for _, b := range []struct {
		key  string
		bits *int
	}{{"v_down_bits", o.VDownBits}, {"lm_head_bits", o.LMHeadBits}} {
		if b.bits != nil && *b.bits != 4 && *b.bits != 8 {
			return []recipe.OptionProblem{{Key: b.key, Msg: fmt.Sprintf("is %d, which is not one of its values", *b.bits), Hint: "use 4 or 8"}}
		}
	}
	if o.Symmetric != nil && o.method() == MethodHQQ {
		return []recipe.OptionProblem{{Key: "symmetric", Msg: "only applies to method: rtn (HQQ always fits a zero point per block)",
			Hint: "remove symmetric:, or set method: rtn to use round-to-nearest"}}
	}
	if o.LMHeadBits != nil && plan.Or(o.KeepLMHead, false) {
		return []recipe.OptionProblem{{Key: "lm_head_bits", Msg: "does not apply with keep_lm_head: true, which leaves the output projection in float",
			Hint: "remove lm_head_bits:, or keep_lm_head: true"}}
	}
	return nil
}

func options(format string) any {
	if format == "onnx-int4" {
		return &Int4Options{}
	}
	return &ExportOptions{}
}

// Export is the kind of the onnx family's export step, which QNN's QDQ
// flow starts from.
var Export steps.Kind = onnxExport{}
