package toolchain

// NVIDIA: nvidia-modelopt is on PyPI and pinned like any Python toolchain,
// but its calibration runs the model on an NVIDIA GPU, and TensorRT-LLM and
// TensorRT Edge-LLM build engines on, and for, the GPU they run on.
const (
	ModelOpt          = "modelopt"
	ToolModelOpt      = "modelopt_quantize.py"
	ToolTRTLLMBuild   = "trtllm-build"
	ToolEdgeLLMExport = "tensorrt-edgellm-export-llm"
	ToolEdgeLLMBuild  = "llm_build"
	ToolNvidiaSMI     = "nvidia-smi"
)

func init() {
	RegisterPython(ModelOpt, []string{ToolModelOpt},
		"nvidia-modelopt 0.47 with torch 2.11: NVFP4 (FP8 KV cache) and INT4 AWQ quantization and checkpoint export; installs anywhere, but runs only with an NVIDIA GPU")
	RegisterExternal("nvidia-gpu", []string{ToolNvidiaSMI},
		"not run here: the trtllm-int4 and nvfp4 formats need an NVIDIA GPU and its driver (nvidia-smi); engines are built on the device that runs them (Jetson: JetPack)")
	RegisterExternal("tensorrt-llm", []string{ToolTRTLLMBuild},
		"not run here: needs an NVIDIA GPU; install TensorRT-LLM on the target (JetPack container or `pip install tensorrt-llm` on x86 with CUDA) so trtllm-build is on PATH")
	RegisterExternal("tensorrt-edgellm", []string{ToolEdgeLLMExport, ToolEdgeLLMBuild},
		"not run here: needs an NVIDIA GPU; TensorRT Edge-LLM (github.com/NVIDIA/TensorRT-Edge-LLM): `pip install .` on an x86 GPU host for the ONNX export, and its C++ llm_build built on the Jetson (JetPack 7) for the engine")
}
