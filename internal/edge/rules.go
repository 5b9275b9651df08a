package edge

// platformRule is the domain brief's picker for one platform: the devices
// to check in order (the most constrained first, so a model that fits there
// fits the rest), the formats in order of preference, the KV cache type,
// and the reasons, each traceable to the brief or the device catalog.
type platformRule struct {
	Name    string
	Summary string
	Devices []string
	Formats []string
	KVDtype string
	Reasons []string
}

var platformRules = []platformRule{
	{
		Name: "ios", Summary: "iPhone apps (Apple Neural Engine)",
		Devices: []string{"apple-a18"}, Formats: []string{"coreml-int4"}, KVDtype: "f16",
		Reasons: []string{
			"iOS reaches the Apple Neural Engine only through Core ML; llama.cpp's Metal backend runs on the GPU, not the ANE (platform guide)",
			"Core ML INT4 weights with FP16 activations is the ANE's format (platform guide); 4-bit weights halve the bytes each token reads against 8-bit, and decode on a phone is bounded by its memory bandwidth",
		},
	},
	{
		Name: "android", Summary: "Android apps (Qualcomm Hexagon NPU)",
		Devices: []string{"snapdragon-8-gen-3", "snapdragon-8-elite"}, Formats: []string{"qnn-w4a16", "qnn-w8a16"}, KVDtype: "f16",
		Reasons: []string{
			"Android flagships run models on the Hexagon NPU through the QNN SDK or Qualcomm AI Hub, converted from PyTorch or ONNX (platform guide); edgepipe compiles the Hexagon context binary for the phone's SoC with QNN's HTP backend (recipes/android.yaml)",
			"QNN INT4 weights with 16-bit activations first: decode is bandwidth-bound (77 GB/s on a Snapdragon 8 Gen 3), so 4-bit weights decode about twice as fast as INT8 (qnn-w8a16 keeps more quality)",
		},
	},
	{
		Name: "windows-arm", Summary: "Windows on Arm laptops (Snapdragon X Elite Hexagon NPU)",
		Devices: []string{"snapdragon-x-elite"}, Formats: []string{"qnn-w4a16", "qnn-w8a16"}, KVDtype: "f16",
		Reasons: []string{
			"Copilot+ laptops on the Snapdragon X Elite run models on its 45-TOPS Hexagon NPU through QNN (ONNX Runtime's QNN execution provider loads the EPContext model and context binary); edgepipe compiles it for the SC8380XP (soc_model 60, htp_arch v73) with QNN's HTP backend",
			"QNN INT4 weights with 16-bit activations first: decode is bandwidth-bound (135 GB/s), so 4-bit weights decode about twice as fast as INT8 (qnn-w8a16 keeps more quality)",
		},
	},
	{
		Name: "browser", Summary: "web apps (WebGPU / WebLLM)",
		Devices: []string{"webgpu-android", "webgpu-m3-max"}, Formats: []string{"mlc-q4f16_1", "mlc-q4f32_1"}, KVDtype: "f16",
		Reasons: []string{
			"browsers run models through WebGPU with WebLLM, which loads MLC q4f16_1 weights (q4f32_1 where the browser has no shader-f16) and does not accept GGUF (platform guide)",
			"checked on Chrome on an Android flagship first, the weakest browser that runs it; desktop browsers (an M3 Max) when it does not fit or is too slow there. Keep a server fallback behind the same OpenAI-compatible API for browsers without WebGPU (platform guide)",
		},
	},
	{
		Name: "jetson-nano", Summary: "NVIDIA Jetson Orin Nano Super (8 GB)",
		Devices: []string{"jetson-orin-nano-super"}, Formats: []string{"gguf-q4_k_m", "trtllm-int4"}, KVDtype: "f16",
		Reasons: []string{
			"the Orin Nano Super is bandwidth-bound (102 GB/s) and fits 3B-class models; Q4 GGUF through llama.cpp, or TensorRT-LLM INT4 (platform guide)",
			"GGUF Q4_K_M first: llama.cpp's CUDA build runs it and it converts and validates on any host; TensorRT-LLM INT4 engines must be built on the Jetson",
		},
	},
	{
		Name: "jetson-agx", Summary: "NVIDIA Jetson AGX Orin (64 GB)",
		Devices: []string{"jetson-agx-orin"}, Formats: []string{"trtllm-int4", "gguf-q4_k_m"}, KVDtype: "f16",
		Reasons: []string{
			"TensorRT-LLM INT4 (W4A16 AWQ weights) through TensorRT Edge-LLM, with an FP16 KV cache (kv_dtype: q8 for INT8 when the context is long): decode is bandwidth-bound (205 GB/s), and 4-bit weights read a quarter of FP16's bytes per token",
			"not NVFP4 with an FP8 KV cache, which the platform guide lists for \"AGX / Thor\": that is Thor's. Orin is Ampere, with neither FP4 nor FP8 tensor cores (NVFP4 is Blackwell-native); GGUF Q4_K_M through llama.cpp's CUDA build is the fallback that converts and validates on any host",
		},
	},
	{
		Name: "jetson-thor", Summary: "NVIDIA Jetson AGX Thor (128 GB)",
		Devices: []string{"jetson-thor"}, Formats: []string{"nvfp4", "trtllm-int4"}, KVDtype: "fp8",
		Reasons: []string{
			"Jetson AGX and Thor: NVFP4 weights with an FP8 KV cache (platform guide); Thor's Blackwell GPU has FP4 tensor cores",
			"Thor runs about 2x AGX Orin, with EAGLE-3 speculative decoding and NVFP4 on JetPack 7.1 (platform guide)",
		},
	},
	{
		Name: "laptop", Summary: "CPU laptops and Apple Silicon Macs (llama.cpp)",
		Devices: []string{"x86-laptop", "apple-m4", "apple-m3-max"}, Formats: []string{"gguf-q4_k_m"}, KVDtype: "f16",
		Reasons: []string{
			"CPU and Apple Silicon laptops run llama.cpp, whose format is GGUF; Q4_K_M is the recommended type (platform guide: Llama 3 70B at 40 GB, perplexity 4.25 against 3.12 at FP16)",
			"checked on a 16 GB x86 laptop (89.6 GB/s) first, the most common and the slowest; Apple Silicon Macs (M4, M3 Max) when it does not fit or is too slow there",
		},
	},
	{
		Name: "intel-npu", Summary: "Intel Core Ultra laptops (Lunar Lake NPU, OpenVINO)",
		Devices: []string{"intel-lunar-lake"}, Formats: []string{"openvino-int4", "openvino-int8"}, KVDtype: "f16",
		Reasons: []string{
			"Intel's NPU runs LLMs through OpenVINO (platform guide), as an OpenVINO IR whose weights NNCF compressed with the settings Intel's NPU guide requires: INT4 symmetric, ratio 1.0, group 128 for models up to 4-5B or channel-wise above (OpenVINO docs, \"OpenVINO GenAI on NPU\")",
			"INT4 is the NPU's format (the guide's \"must\"); openvino-int8, the fallback when INT4 loses too much, keeps more quality but runs on the CPU and GPU plugins, not the NPU. Decode is bandwidth-bound (136.5 GB/s on a Core Ultra 9 288V). edgepipe gates both on OpenVINO's CPU plugin: the NPU itself is not measured here",
		},
	},
	{
		Name: "amd-npu", Summary: "AMD Ryzen AI 300 laptops (XDNA 2 NPU)",
		Devices: []string{"amd-ryzen-ai-300"}, Formats: []string{"onnx-int4", "gguf-q4_k_m"}, KVDtype: "f16",
		Reasons: []string{
			"AMD's NPU runs LLMs only through Ryzen AI Software: ONNX Runtime GenAI models quantized with AMD Quark (AWQ uint4, group 128) and post-processed for the VitisAI execution provider's hybrid or NPU-only mode (Ryzen AI docs). edgepipe does not produce that format, so this pick does NOT run on the NPU",
			"what edgepipe can make for the machine is for its CPU: ONNX INT4 (MatMulNBits, the operator OGA's INT4 models use too) through ONNX Runtime's CPU provider, or GGUF Q4_K_M through llama.cpp; decode is bandwidth-bound (120 GB/s of LPDDR5X-7500)",
		},
	},
	{
		Name: "gpu", Summary: "CUDA / ROCm GPU servers (vLLM)",
		Devices: []string{"nvidia-a100", "nvidia-h100"}, Formats: []string{"awq-w4a16", "gptq-w4a16"}, KVDtype: "f16",
		Reasons: []string{
			"CUDA and ROCm GPUs serve GPTQ or AWQ INT4 checkpoints through vLLM (platform guide)",
			"AWQ first: Llama 3 70B in AWQ INT4 is 35 GB with MMLU 78.1% against 79.5% at FP16, and decodes at 75 tok/s on an A100 against 38 at FP16 (platform guide); both are calibrated, which naive INT4 rounding is not",
		},
	},
}

// Platforms lists the platforms `edgepipe pick` knows, in order.
func Platforms() []string {
	names := make([]string, len(platformRules))
	for i, r := range platformRules {
		names[i] = r.Name
	}
	return names
}

func ruleFor(platform string) (platformRule, bool) {
	for _, r := range platformRules {
		if r.Name == platform {
			return r, true
		}
	}
	return platformRule{}, false
}

// conversions say in a line how each format is made, for the picker's
// output; the tools are the ones the toolchain notes name.
var conversions = map[string]string{
	"coreml-int4":   "PyTorch -> coremltools ct.convert (mlprogram, iOS 18) -> linear_quantize_weights INT4, per block of 32 (converts on Linux; prediction needs macOS)",
	"qnn-w4a16":     "ONNX export -> fixed input shapes -> ONNX Runtime QNN QDQ quantization (INT4 weights, 16-bit activations) -> Hexagon context binary with the QNN SDK or Qualcomm AI Hub",
	"qnn-w8a16":     "ONNX export -> fixed input shapes -> ONNX Runtime QNN QDQ quantization (INT8 weights, 16-bit activations) -> Hexagon context binary with the QNN SDK or Qualcomm AI Hub",
	"mlc-q4f16_1":   "edgepipe's MLC converter (or mlc_llm convert_weight) --quantization q4f16_1 -> mlc-chat-config.json -> perplexity of the shards read back -> decoded on WebGPU in Chromium; the model library needs MLC's TVM (mlc_llm compile --device webgpu)",
	"mlc-q4f32_1":   "edgepipe's MLC converter (or mlc_llm convert_weight) --quantization q4f32_1 (for browsers without shader-f16) -> mlc-chat-config.json -> perplexity of the shards read back -> decoded on WebGPU in Chromium; the model library needs MLC's TVM",
	"gguf-q4_k_m":   "convert_hf_to_gguf (F16) -> llama-quantize Q4_K_M -> llama-perplexity against the F16 baseline",
	"trtllm-int4":   "TensorRT-LLM INT4 engine, built on the target NVIDIA GPU",
	"nvfp4":         "nvidia-modelopt NVFP4 quantization with an FP8 KV cache -> export_hf_checkpoint -> TensorRT Edge-LLM or vLLM",
	"awq-w4a16":     "llmcompressor oneshot with AWQModifier (INT4 weights, group 128) on calibration text",
	"gptq-w4a16":    "llmcompressor oneshot with GPTQModifier (INT4 weights, group 128) on calibration text",
	"openvino-int4": "optimum-intel export (stateful OpenVINO IR) -> NNCF weight compression INT4 symmetric, group 128, ratio 1.0 (Intel's NPU settings) -> perplexity on OpenVINO's CPU plugin; the NPU compiles the IR when OpenVINO GenAI loads it",
	"openvino-int8": "optimum-intel export (stateful OpenVINO IR) -> NNCF weight compression INT8 per channel -> perplexity on OpenVINO's CPU plugin",
	"onnx-int4":     "optimum-onnx export (fp32, KV cache) -> ONNX Runtime MatMulNBits INT4 (HQQ, block 32) -> perplexity on ONNX Runtime's CPU provider (not Ryzen AI's NPU format)",
}
