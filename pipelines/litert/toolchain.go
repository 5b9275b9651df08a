// Package litert declares the pinned LiteRT toolchain (litert.lock)
// and its helper scripts (python/): PyTorch -> TFLite/LiteRT conversion, FP32 and full-integer
// INT8 (litert-torch's PT2E quantizer, calibrated), and validation with the LiteRT
// interpreter. The vision family's tflite-int8 format runs them.
package litert

import "github.com/edgepipe/edgepipe/internal/toolchain"

// Toolchain is the pinned LiteRT environment.
const Toolchain = "litert"

// Tool names: the helper scripts under python/ that run in the toolchain.
const (
	// ToolConvert converts a torchvision classifier's safetensors to .tflite (fp32 or int8).
	ToolConvert = "litert_convert.py"
	// ToolValidate scores a .tflite with the LiteRT interpreter on a labelled set.
	ToolValidate = "litert_validate.py"
	// ToolBench times a .tflite's single inferences with the LiteRT
	// interpreter (the vision bench's protocol, pipelines/vision).
	ToolBench = "litert_bench.py"
)

func init() { toolchain.RegisterHelpers("pipelines/litert", toolchain.Dir(python, "python")) }

// Spec is the toolchain, for the family that brings it.
func Spec() toolchain.Spec {
	return toolchain.Python(Toolchain, locks, []string{ToolConvert, ToolValidate, ToolBench},
		"litert-torch 0.10.0 (ai-edge-torch renamed) converts PyTorch vision models to TFLite/LiteRT, FP32 or full-integer INT8 "+
			"(PT2E static quantization, calibrated); ai-edge-litert 2.3.0's interpreter validates them on this CPU").
		WithPackages("python", "litert-torch", "ai-edge-litert", "torch", "torchvision").
		// litert-torch imports torchao, jax and the LiteRT converter's native module.
		WithSmokeImport("import torch, torchvision, litert_torch, ai_edge_litert.interpreter")
}
