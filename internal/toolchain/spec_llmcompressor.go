package toolchain

// LLMCompressor is the toolchain that quantizes to GPTQ and AWQ W4A16.
const LLMCompressor = "llmcompressor"

// Tools of the llmcompressor toolchain. The perplexity script has its own
// name because tool names are global across toolchains (hf_perplexity.py
// belongs to the llama toolchain), and a compressed-tensors checkpoint only
// loads where compressed-tensors and transformers 5 are installed.
const (
	ToolLLMCQuantize   = "llmc_quantize.py"
	ToolLLMCPerplexity = "llmc_perplexity.py"
)

func init() {
	RegisterPython(LLMCompressor, []string{ToolLLMCQuantize, ToolLLMCPerplexity},
		"llmcompressor, compressed-tensors and transformers 5 for GPTQ and AWQ INT4 (W4A16) on the CPU, and perplexity of the result")
}
