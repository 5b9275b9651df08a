// Package openvino is the OpenVINO format family, for Intel NPUs (Core
// Ultra: Meteor Lake, Lunar Lake) and the other OpenVINO devices:
// optimum-intel exports a Hugging Face checkpoint to a stateful OpenVINO IR
// (the KV cache in the model's state, tokenizer and detokenizer IRs beside
// it), NNCF compresses its weights (INT4 with the settings Intel documents
// for its NPU, or INT8), and OpenVINO's runtime scores the result on this
// host's CPU, on the baseline's tokens, decodes it token by token through
// the KV cache in its state (against its own prefill and the unconverted
// model's greedy generations), and times it.
//
// What runs here is the CPU plugin: the NPU plugin needs an Intel NPU and
// its driver. The artifact is what Intel's NPU pipeline (OpenVINO GenAI's
// LLMPipeline on "NPU") loads; its perplexity and speed on an NPU were not
// measured, and nothing here says they were.
package openvino

import (
	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

// Toolchain is the Python environment of the OpenVINO family
// (openvino.lock).
const Toolchain = "openvino"

// Tools of the openvino toolchain (tool names are global across toolchains).
const (
	ToolExport   = "openvino_export.py"
	ToolQuantize = "openvino_quantize.py"
	ToolValidate = "openvino_validate.py"
	ToolBench    = "openvino_bench.py"
)

// Formats.
const (
	FormatInt4 = "openvino-int4"
	FormatInt8 = "openvino-int8"
)

// Family is the OpenVINO family, for registration.
func Family() plan.Family {
	return plan.Family{
		Name: "openvino",
		Formats: catalog.FormatSet{
			Labels: map[string]string{"openvino": "OpenVINO"},
			Formats: []catalog.Format{
				{Name: FormatInt4, Family: "openvino", BitsPerWeight: 4.5, BlockSize: DefaultGroupSize, RunsHere: "partly", Bench: BenchName,
					Note: "OpenVINO IR with NNCF INT4 symmetric weights (Intel's NPU settings: ratio 1.0, group 128 or channel-wise); " +
						"the embedding and lm_head stay INT8. Converted and scored with OpenVINO's CPU plugin here; the NPU plugin needs an Intel NPU"},
				{Name: FormatInt8, Family: "openvino", BitsPerWeight: 8, RunsHere: "partly", Bench: BenchName,
					Note: "OpenVINO IR with NNCF INT8 per-channel weights. Converted and scored with OpenVINO's CPU plugin here; the NPU plugin needs an Intel NPU"},
			},
		},
		Options: options,
		Expand:  expand,
		Refuses: refuses,
		Kinds:   []steps.Kind{ovExport{}, ovQuantize{}, ovValidate{}, ovDecode{}},
		Helpers: toolchain.Dir(python, "python"),
		Toolchains: []toolchain.Spec{toolchain.Python(Toolchain, locks, []string{ToolExport, ToolQuantize, ToolValidate, ToolBench, ToolDecode},
			"optimum-intel (OpenVINO IR export), NNCF (weight compression) and the OpenVINO runtime; its CPU plugin runs here, "+
				"the NPU plugin needs an Intel NPU and its driver, which this host does not have").
			WithPackages("python", "openvino", "nncf", "optimum-intel", "torch", "transformers")},
		Bench: ovBench{},
	}
}

// Defaults of openvino-int4: what Intel's guide "OpenVINO GenAI on NPU"
// (openvino docs, 2026.3) says LLMs for the NPU must be exported with:
// symmetric (--sym), 4-bit (--weight-format int4), group 128 (recommended
// for models up to 4-5B parameters) or channel-wise (-1), ratio 1.0.
const (
	DefaultGroupSize = 128
	DefaultRatio     = 1.0
	// DefaultGroupSizeFallback: NNCF refuses a group that does not divide
	// a layer's input width unless told what to do; "adjust" takes the
	// largest group under it that divides (SmolLM2's 576: 64).
	DefaultGroupSizeFallback = "adjust"
	// Calibration of the data-aware methods (AWQ, scale estimation,
	// GPTQ): optimum-intel's dataset default is 128 samples; 32 of 256
	// tokens keeps a CPU run to minutes.
	DefaultSamples = 32
	DefaultSeqLen  = 256
)

// Int4Options are openvino-int4's with: options.
type Int4Options struct {
	Mode              *string  `yaml:"mode" enum:"sym,asym" doc:"sym (the default: what Intel's NPU needs, a fixed zero point) or asym (a zero point per group: more accurate, for OpenVINO's CPU and GPU plugins; Intel's NPU guide says LLMs must be exported symmetric)."`
	GroupSize         *int     `yaml:"group_size" min:"-1" doc:"Input columns sharing one scale: 128 (the default; Intel's recommendation for models up to 4-5B parameters on the NPU) or -1 for one scale per output channel (Intel's choice for larger models: fastest on the NPU, least accurate)."`
	GroupSizeFallback *string  `yaml:"group_size_fallback" enum:"adjust,error,ignore" doc:"Where group_size does not divide a layer's input width: adjust (the default: NNCF takes the largest group that does, at least 32), error, or ignore (leave that layer in the backup precision)."`
	Ratio             *float64 `yaml:"ratio" min:"0" doc:"The share of the ratio-defining weights in 4 bits, the rest INT8 (default 1.0, as Intel's NPU guide requires; with a data-aware method NNCF picks the 8-bit layers by sensitivity)."`
	AllLayers         *bool    `yaml:"all_layers" doc:"Compress the embedding and the last MatMul (lm_head) to 4 bits too (default false: NNCF keeps them INT8)."`
	AWQ               *bool    `yaml:"awq" doc:"Activation-aware weight quantization on the calibration text (NNCF's AWQ; data-aware)."`
	ScaleEstimation   *bool    `yaml:"scale_estimation" doc:"NNCF's scale estimation on the calibration text: fits each group's scale to the layer's output error (data-aware)."`
	GPTQ              *bool    `yaml:"gptq" doc:"NNCF's GPTQ on the calibration text: error feedback while rounding (data-aware)."`
	Samples           *int     `yaml:"calibration_samples" min:"1" doc:"Calibration pieces for the data-aware methods (default 32)."`
	SeqLen            *int     `yaml:"calibration_seq_len" min:"8" doc:"Tokens per calibration piece (default 256)."`
}

// Int8Options are openvino-int8's with: options.
type Int8Options struct {
	Mode *string `yaml:"mode" enum:"sym,asym" doc:"asym (the default: NNCF's INT8_ASYM, a zero point per output channel) or sym."`
}

func options(format string) any {
	if format == FormatInt8 {
		return &Int8Options{}
	}
	return &Int4Options{}
}

func (o *Int4Options) dataAware() bool {
	return plan.Or(o.AWQ, false) || plan.Or(o.ScaleEstimation, false) || plan.Or(o.GPTQ, false)
}

// CheckOptions refuses values NNCF would refuse, and calibration settings
// no method reads, rather than ignoring them.
func (o *Int4Options) CheckOptions() []recipe.OptionProblem {
	var out []recipe.OptionProblem
	if g := plan.Or(o.GroupSize, DefaultGroupSize); g == 0 || g < -1 {
		out = append(out, recipe.OptionProblem{Key: "group_size", Msg: "must be -1 (channel-wise) or a positive group",
			Hint: "use 128 (Intel's NPU recommendation for small models), 64, 32 or -1"})
	}
	if r := plan.Or(o.Ratio, DefaultRatio); !(r > 0 && r <= 1) {
		out = append(out, recipe.OptionProblem{Key: "ratio", Msg: "must be in (0, 1]",
			Hint: "1.0 puts every ratio-defining weight in 4 bits, as Intel's NPU guide asks"})
	}
	if !o.dataAware() {
		for _, c := range []struct {
			key string
			set bool
		}{{"calibration_samples", o.Samples != nil}, {"calibration_seq_len", o.SeqLen != nil}} {
			if c.set {
				out = append(out, recipe.OptionProblem{Key: c.key, Msg: "only applies to a data-aware method",
					Hint: "set awq: true, scale_estimation: true or gptq: true, or remove " + c.key})
			}
		}
	}
	return out
}
