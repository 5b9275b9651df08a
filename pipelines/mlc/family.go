// Package mlc is the MLC format family (WebGPU / WebLLM): q4f16_1 and
// q4f32_1 weights (int4 per group of 32 with a float16 or float32 scale)
// in MLC's tensor-cache layout, with mlc-chat-config.json and a WebLLM
// model record. The weights are written by edgepipe's own converter
// (`backend: native`, the default: mlc_native.py, which follows mlc_llm's
// group quantization) or by mlc_llm itself (`backend: mlc-llm`, which
// edgepipe cannot install). Either way the published shards are read back,
// dequantized into the unconverted model and gated on perplexity and on
// its token-by-token decode (against its own prefill and the unconverted
// model's greedy generations), and decoded again in Chromium by a WGSL
// kernel on real WebGPU, which must give the same float32 weights bit for
// bit.
package mlc

import (
	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

// Toolchain names where mlc_llm comes from: the user's own install, since
// its wheels come from MLC's own package index with a TVM build that
// matches them, so edgepipe cannot pin and install it from a lock.
const Toolchain = "mlc"

// BrowserToolchain is where Chromium comes from: the operating system's
// package (Debian's chromium), installed by the Taskfile's toolchains task.
const BrowserToolchain = "browser"

// Backends of the MLC weight conversion.
const (
	BackendNative = "native"
	BackendMLCLLM = "mlc-llm"
)

// Family is the MLC family, for registration.
func Family() plan.Family {
	return plan.Family{
		Name: "mlc",
		Formats: catalog.FormatSet{
			Labels: map[string]string{"mlc": "MLC"},
			Formats: []catalog.Format{
				{Name: "mlc-q4f16_1", Family: "mlc", BitsPerWeight: 4.5, BlockSize: 32, RunsHere: "partly",
					Note: "MLC weights, int4 with an fp16 scale per 32; WebLLM needs the browser's shader-f16 feature for it. Converted, gated and decoded on WebGPU (Chromium, SwiftShader) here; the WebGPU model library needs the MLC TVM toolchain"},
				{Name: "mlc-q4f32_1", Family: "mlc", BitsPerWeight: 5, BlockSize: 32, RunsHere: "partly",
					Note: "MLC weights, int4 with an fp32 scale per 32 (stored as bf16): what WebLLM serves to browsers without shader-f16. Converted, gated and decoded on WebGPU here; the model library needs the MLC TVM toolchain"},
			},
		},
		Options: func(string) any { return &Options{} },
		Expand:  expandMLC,
		Kinds: []steps.Kind{mlcConvertWeight{}, mlcGenConfig{}, mlcCompile{}, mlcValidate{},
			mlcNativeConvert{}, mlcNativeConfig{}, mlcGate{}, mlcWebGPUCheck{}, mlcDecode{}},
		Helpers: toolchain.Dir(python, "python"),
		Refuses: refuses,
		Toolchains: []toolchain.Spec{
			toolchain.External(Toolchain, []string{ToolMLCLLM},
				"not installed by edgepipe (mlc_llm is not on PyPI): install the nightly CPU wheels with "+
					"`pip install --pre -U -f https://mlc.ai/wheels mlc-llm-nightly-cpu mlc-ai-nightly-cpu` "+
					"(https://llm.mlc.ai/docs/install/mlc_llm.html), then put mlc_llm on PATH or pass --tool-path; "+
					"only MLC targets with `backend: mlc-llm` or `compile: true` use it; "+
					"`mlc_llm compile --device webgpu` also needs emscripten and the MLC TVM web runtime"),
			toolchain.System(BrowserToolchain, []string{ToolChromium},
				"Chromium decodes MLC weights on WebGPU for the mlc-webgpu-check step: install Debian's package with "+
					"`go tool task toolchains` (runs `apt-get install -y chromium` as root) or `apt-get install chromium`"),
		},
		ToolsFrom: map[string][]string{toolchain.Llama: {ToolNative, ToolGate, ToolDecode}},
	}
}

// Options are an MLC target's with: options.
type Options struct {
	Backend           *string `yaml:"backend" enum:"native,mlc-llm" doc:"Who writes the weights and mlc-chat-config.json: native (default: edgepipe's converter, which follows mlc_llm's group quantization; no mlc_llm needed) or mlc-llm (mlc_llm convert_weight and gen_config, which edgepipe cannot install)."`
	ConvTemplate      *string `yaml:"conv_template" doc:"The conversation template mlc-chat-config.json names (default chatml)."`
	Compile           bool    `yaml:"compile" doc:"Also compile the WebGPU model library (mlc_llm compile --device webgpu; needs the MLC TVM toolchain and emscripten)."`
	Scales            *string `yaml:"scales" enum:"imatrix,mse,mlc" doc:"How the native converter chooses each group's scale: imatrix (default: the scale with the least squared error, each input column weighted by its mean squared activation on the recipe's calibration text, as llama.cpp's importance matrix does), mse (the same, unweighted; no calibration) or mlc (mlc_llm's max_abs / 7, byte-identical to mlc_llm). All decode the same way in every MLC runtime; backend: mlc-llm always uses mlc."`
	Rounding          *string `yaml:"rounding" enum:"gptq,gptq-embedding,rtn" doc:"How the native converter rounds weights to codes with scales: imatrix: gptq (default: GPTQ's error feedback for every layer and the tied embedding, column by column through the inverse of the calibration activations' Hessian, X^T X; q/k/v's Hessian gives each calibration window's first token, the attention sink, a fifth of its weight; columns in act order with static group scales), gptq-embedding (GPTQ for the tied embedding only, the linear layers to their nearest code; the default with awq: true) or rtn (every weight to its nearest code). Measured on the built-in model, 49 x 512 tokens (q4f16_1): gptq +1.40, gptq-embedding +2.88, rtn +3.30; GPTQ without the sink's weight scored +3.60 on 16 x 512 tokens, worse than rtn."`
	AWQ               *bool   `yaml:"awq" doc:"With scales: imatrix and rounding: rtn or gptq-embedding (awq: true alone takes gptq-embedding), rescale each linear layer's input columns by their calibration activations before quantizing (AWQ), folded into the norm or the rows that produce that input so the float model is unchanged; the exponent of the scale is searched per layer for the least output error (default false: on the built-in model it cut every layer kind's output error, 5x on down_proj, but perplexity by only 0.08 on browser.yaml's 49 chunks, and on 16 chunks it scored 0.25 worse, while the conversion took 5x longer)."`
	CalibrationChunks *int    `yaml:"calibration_chunks" min:"1" doc:"With scales: imatrix, how many windows of the gate's context are taken from the calibration text (default: 16,384 tokens' worth, 32 windows of 512 or 64 of 256, as many as the text has at most; GPTQ's Hessians need that many tokens whatever the context: 32 windows of 256 scored +2.15 on q4f32_1 where 64 scored +1.56)."`
	WebGPUCheck       *bool   `yaml:"webgpu_check" doc:"Decode the published shards in headless Chromium on WebGPU and require the gate's weights bit for bit (default true; needs Debian's chromium)."`
}

// Scale choices of the native converter.
const (
	ScalesImatrix = "imatrix"
	ScalesMSE     = "mse"
	ScalesMLC     = "mlc"
)

// Rounding choices of the native converter with imatrix scales.
const (
	RoundingGPTQ = "gptq"
	// RoundingGPTQEmbedding: GPTQ for the tied embedding, rtn for the rest.
	RoundingGPTQEmbedding = "gptq-embedding"
	RoundingRTN           = "rtn"
)

// DefaultCalibrationTokens is how many calibration tokens the imatrix
// pass reads unless calibration_chunks says otherwise: a Hessian of the
// 1,536-wide MLP input needs several times that many tokens to generalise.
const DefaultCalibrationTokens = 16384

// DefaultCalibrationChunks is the windows of ctx tokens that hold
// DefaultCalibrationTokens.
func DefaultCalibrationChunks(ctx int) int {
	return max(1, (DefaultCalibrationTokens+ctx-1)/max(ctx, 1))
}

// CheckOptions refuses scales: with backend mlc-llm, whose convert_weight
// has no such choice, rather than silently publishing mlc_llm's scales.
func (o *Options) CheckOptions() []recipe.OptionProblem {
	if o.Scales != nil && plan.Or(o.Backend, BackendNative) == BackendMLCLLM {
		return []recipe.OptionProblem{{Key: "scales", Msg: "only applies to backend: native (mlc_llm convert_weight always uses max_abs / 7)",
			Hint: "remove scales:, or use backend: native"}}
	}
	calibrated := plan.Or(o.Backend, BackendNative) == BackendNative && plan.Or(o.Scales, ScalesImatrix) == ScalesImatrix
	if o.CalibrationChunks != nil && !calibrated {
		return []recipe.OptionProblem{{Key: "calibration_chunks", Msg: "only applies to scales: imatrix with backend: native",
			Hint: "remove calibration_chunks:, or use scales: imatrix"}}
	}
	if o.AWQ != nil && (!calibrated || (o.Rounding != nil && *o.Rounding == RoundingGPTQ)) {
		return []recipe.OptionProblem{{Key: "awq", Msg: "only applies to scales: imatrix with rounding: rtn or gptq-embedding (its statistics come from the calibration pass)",
			Hint: "remove awq:, or use scales: imatrix with rounding: rtn"}}
	}
	if o.Rounding != nil && !calibrated {
		return []recipe.OptionProblem{{Key: "rounding", Msg: "only applies to scales: imatrix with backend: native (GPTQ's Hessian comes from its calibration pass)",
			Hint: "remove rounding:, or use scales: imatrix"}}
	}
	return nil
}

// refuses: edgepipe's MLC converter (mlc_native.py), the shard layout
// check (readHFLlamaConfig) and the gate's and decode check's
// dequantization write and read MLC's llama parameter layout (q/k/v and
// gate/up concatenated, llama's names); another architecture would fail
// in its first step, after the run started.
func refuses(_, arch string) string {
	if arch == "llama" {
		return ""
	}
	return "edgepipe's MLC converter and checks know MLC's llama parameter layout only (fused q/k/v and gate/up projections under llama's names)"
}
