package toolchain

// Core ML: coremltools converts and quantizes on Linux (prediction needs
// macOS). coremltools 9.0 is tested with torch up to 2.7.0, so this is an
// environment of its own beside the llama toolchain's torch 2.11.
const (
	CoreML          = "coreml"
	ToolCoreMLConv  = "coreml_convert.py"
	ToolCoreMLCheck = "coreml_validate.py"
)

func init() {
	RegisterPython(CoreML, []string{ToolCoreMLConv, ToolCoreMLCheck},
		"coremltools 9.0 with torch 2.7.0 and transformers: Core ML conversion, INT4 per-block quantization and the Linux-side validation (Core ML prediction itself needs macOS)")
}
