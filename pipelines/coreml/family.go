// Package coreml is the Core ML format family (Apple Neural Engine):
// coremltools converts a Hugging Face checkpoint to an ML program for iOS 18
// with INT4 weights and FP16 compute, and on Linux the package is checked
// structurally and its INT4 weights scored in PyTorch against the
// unconverted model (Core ML prediction itself needs macOS).
package coreml

import (
	"slices"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

// Toolchain is the family's Python environment: coremltools 9.0 is tested
// with torch up to 2.7.0, so it is an environment of its own beside the
// llama toolchain's torch 2.11.
const Toolchain = "coreml"

// Family is the Core ML family, for registration.
func Family() plan.Family {
	return plan.Family{
		Name: "coreml",
		Formats: catalog.FormatSet{
			Labels: map[string]string{"coreml": "Core ML"},
			Formats: []catalog.Format{
				{Name: "coreml-int4", Family: "coreml", BitsPerWeight: 4.5, BlockSize: 32, RunsHere: "partly",
					Note: "INT4 weights (per-block, block 32, fp16 scales) with FP16 activations for the ANE; coremltools converts and saves on Linux, but Core ML prediction needs macOS"},
			},
		},
		Options: func(string) any { return &Options{} },
		Expand:  expandCoreML,
		Refuses: refuses,
		Kinds:   []steps.Kind{coremlConvert{}, coremlValidate{}},
		// One .mlpackage, which an app compiles and loads by any name.
		NamedArtifact: func(string) bool { return true },
		Helpers:       toolchain.Dir(python, "python"),
		Toolchains: []toolchain.Spec{toolchain.Python(Toolchain, locks, []string{ToolCoreMLConvert, ToolCoreMLValidate},
			"coremltools 9.0 with torch 2.7.0 and transformers: Core ML conversion, INT4 per-block quantization and the Linux-side validation (Core ML prediction itself needs macOS)").
			WithPackages("python", "coremltools", "torch", "transformers")},
	}
}

// Options are a Core ML target's with: options.
type Options struct {
	KVCache            *string `yaml:"kv_cache" enum:"stateful,none" doc:"stateful (default): the KV cache lives in Core ML state (iOS 18), none: the model recomputes the whole context every token."`
	Mode               *string `yaml:"mode" enum:"affine,symmetric" doc:"How each block of 32 weights is stored: affine (default: 4-bit codes 0..15 with an fp16 scale and an fp16 offset fitted to the block's min and max) or symmetric (codes -7..7 and a scale, coremltools' linear_symmetric)."`
	VDownBits          *int    `yaml:"v_down_bits" enum:"4,8" doc:"Bits of every layer's v_proj and down_proj (default 8: uint8 codes on the same per-block layout, as llama.cpp's Q4_K_M gives attn_v and ffn_down more bits, and as onnx-int4 does); layers named otherwise stay at 4 bits."`
	QuantizeEmbeddings *bool   `yaml:"quantize_embeddings" doc:"Quantize the token embedding and the output projection too (default false: they stay fp16, as llama.cpp keeps its output tensor at higher precision; a tied small model loses most of its accuracy there)."`
}

// DefaultVDownBits is the value and down projections' width when a target
// sets none.
const DefaultVDownBits = 8

// Weight layouts of the converted package.
const (
	ModeAffine    = "affine"
	ModeSymmetric = "symmetric"
)

// moeArchitectures are mixture-of-experts model types: the Core ML
// conversion traces the model with torch.jit.trace, which records only the
// experts its example input routes to, and coremltools 9.0 has no
// converter for the index_add the expert dispatch uses.
var moeArchitectures = []string{"mixtral", "qwen3_moe", "qwen2_moe", "phimoe", "olmoe", "granitemoe", "jetmoe",
	"dbrx", "deepseek_v2", "deepseek_v3", "gpt_oss", "llama4_text", "glm4_moe"}

// refuses: the conversion reads the text model's settings from the
// checkpoint's top-level config, which a multimodal Gemma 3 keeps in
// text_config (it would lose its sliding window and stateful cache).
func refuses(_, arch string) string {
	switch {
	case slices.Contains(moeArchitectures, arch):
		return "a mixture of experts does not trace to Core ML: torch.jit.trace records only the experts its example input routes to, and coremltools 9.0 has no converter for the expert dispatch's index_add"
	case arch == "gemma3":
		return "the conversion reads the text model's settings from the top-level config, which Gemma 3's multimodal checkpoint keeps in text_config: use the text model (gemma3_text)"
	}
	return ""
}
