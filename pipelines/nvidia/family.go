// Package nvidia is the NVIDIA format family (Jetson, data-center GPUs):
// nvidia-modelopt quantizes (INT4 AWQ, NVFP4 with an FP8 KV cache) and
// exports a checkpoint, and TensorRT-LLM or TensorRT Edge-LLM builds the
// engine on, and for, the GPU it runs on. Every step needs an NVIDIA GPU;
// on a host without one a run refuses them up front.
package nvidia

import (
	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

// Toolchains: nvidia-modelopt is on PyPI and pinned like any Python
// toolchain, but its calibration runs the model on an NVIDIA GPU; the
// others are NVIDIA's and build on the GPU they target.
const (
	Toolchain     = "modelopt"
	ToolNvidiaSMI = "nvidia-smi"
)

// Family is the NVIDIA family, for registration.
func Family() plan.Family {
	return plan.Family{
		Name: "nvidia",
		Formats: catalog.FormatSet{
			Labels: map[string]string{"trtllm": "TensorRT-LLM", "nvfp4": "NVFP4"},
			Formats: []catalog.Format{
				{Name: "trtllm-int4", Family: "trtllm", BitsPerWeight: 4.125, BlockSize: 128, NeedsNVIDIAGPU: true, RunsHere: "no",
					Note: "TensorRT-LLM INT4 engine; engines are built on, and for, the target NVIDIA GPU"},
				{Name: "nvfp4", Family: "nvfp4", BitsPerWeight: 4.5, BlockSize: 16, NeedsNVIDIAGPU: true, RunsHere: "partly", TensorCore: "fp4",
					Note: "FP4 (E2M1) weights with an FP8 scale per 16, FP8 KV cache; nvidia-modelopt quantizes and exports a checkpoint, whether its calibration runs without CUDA is unverified, and running it needs Blackwell FP4 tensor cores"},
			},
		},
		Expand:  expandNvidia,
		Refuses: refuses,
		Kinds:   []steps.Kind{modeloptQuantize{}, trtllmBuild{}, edgellmBuild{}},
		Helpers: toolchain.Dir(python, "python"),
		Toolchains: []toolchain.Spec{
			toolchain.Python(Toolchain, locks, []string{ToolModelOpt},
				"nvidia-modelopt 0.47 with torch 2.11: NVFP4 (FP8 KV cache) and INT4 AWQ quantization and checkpoint export; installs anywhere, but runs only with an NVIDIA GPU").
				WithPackages("python", "nvidia-modelopt", "torch", "transformers"),
			toolchain.External("nvidia-gpu", []string{ToolNvidiaSMI},
				"not run here: the trtllm-int4 and nvfp4 formats need an NVIDIA GPU and its driver (nvidia-smi); engines are built on the device that runs them (Jetson: JetPack)"),
			toolchain.External("tensorrt-llm", []string{ToolTRTLLMBuild},
				"not run here: needs an NVIDIA GPU; install TensorRT-LLM on the target (JetPack container or `pip install tensorrt-llm` on x86 with CUDA) so trtllm-build is on PATH"),
			toolchain.External("tensorrt-edgellm", []string{ToolEdgeLLMExport, ToolEdgeLLMBuild},
				"not run here: needs an NVIDIA GPU; TensorRT Edge-LLM (github.com/NVIDIA/TensorRT-Edge-LLM): `pip install .` on an x86 GPU host for the ONNX export, and its C++ llm_build built on the Jetson (JetPack 7) for the engine"),
		},
		Notes: NvidiaGPUCheck,
	}
}

// refuses: the trtllm-int4 export names the TensorRT-LLM decoder
// "llama" for every model (modelopt_quantize.py), which is right for the
// llama-shaped architectures ModelOpt itself exports as llama (llama,
// mistral, mixtral) and writes a wrong checkpoint for the others (ModelOpt
// names them qwen, gemma3, phi3, ...). nvfp4's Hugging Face export reads
// the architecture itself.
func refuses(format, arch string) string {
	if format != "trtllm-int4" {
		return ""
	}
	switch arch {
	case "llama", "mistral", "mixtral":
		return ""
	}
	return "edgepipe exports trtllm-int4 checkpoints with ModelOpt's llama decoder layout, which only llama, mistral and mixtral models have (nvfp4 takes the others)"
}
