package toolchain

// MLC LLM is not on PyPI (the mlc-llm-* names there are placeholders):
// its wheels come from MLC's own package index, with a TVM build that
// matches them, so edgepipe cannot pin and install it from a lock.
const (
	MLC        = "mlc"
	ToolMLCLLM = "mlc_llm"
)

func init() {
	RegisterExternal(MLC, []string{ToolMLCLLM},
		"not installed by edgepipe (mlc_llm is not on PyPI): install the nightly CPU wheels with "+
			"`pip install --pre -U -f https://mlc.ai/wheels mlc-llm-nightly-cpu mlc-ai-nightly-cpu` "+
			"(https://llm.mlc.ai/docs/install/mlc_llm.html), then put mlc_llm on PATH or pass --tool-path; "+
			"`mlc_llm compile --device webgpu` also needs emscripten and the MLC TVM web runtime")
}
