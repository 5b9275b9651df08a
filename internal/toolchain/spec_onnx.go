package toolchain

// ONNX is the toolchain that exports ONNX models, quantizes them (4-bit
// MatMulNBits, QNN QDQ) and scores them with ONNX Runtime on the CPU.
const ONNX = "onnx"

// Tools of the onnx toolchain (tool names are global across toolchains).
const (
	ToolONNXExport   = "onnx_export.py"
	ToolONNXQuantize = "onnx_quantize.py"
	ToolONNXValidate = "onnx_validate.py"
	ToolQNNQDQ       = "qnn_qdq.py"
	ToolQNNAIHub     = "qnn_ai_hub.py"
	ToolONNXBench    = "onnx_bench.py"
)

// The QNN SDK's tools, which only Qualcomm distributes.
const (
	QNNSDK                        = "qnn-sdk"
	ToolQNNONNXConverter          = "qnn-onnx-converter"
	ToolQNNModelLibGenerator      = "qnn-model-lib-generator"
	ToolQNNContextBinaryGenerator = "qnn-context-binary-generator"
)

func init() {
	RegisterPython(ONNX, []string{ToolONNXExport, ToolONNXQuantize, ToolONNXValidate, ToolQNNQDQ, ToolQNNAIHub, ToolONNXBench},
		"optimum-onnx, ONNX Runtime (CPU) and its quantizers for ONNX and QNN QDQ; qai-hub's client is installed, "+
			"but its compile jobs were not run here: they need a Qualcomm AI Hub account (QAI_HUB_API_TOKEN)")
	RegisterExternal(QNNSDK, []string{ToolQNNONNXConverter, ToolQNNModelLibGenerator, ToolQNNContextBinaryGenerator},
		"not run here: needs Qualcomm's QNN SDK (set QNN_SDK_ROOT and put $QNN_SDK_ROOT/bin/x86_64-linux-clang on "+
			"--tool-path); only used by QNN targets with `backend: qnn-sdk`")
}
