package onnx

import (
	_ "embed"
	"slices"

	"github.com/edgepipe/edgepipe/pipelines/shared"
)

// exportArchitectures is the pinned optimum-onnx's text-generation
// registry (python/tests/test_onnx_architectures.py keeps it equal).
//
//go:embed architectures.txt
var exportArchitectures string

// ExportRefuses says why the ONNX export, which onnx-* and qnn-* targets
// start from, cannot take a model architecture ("" when it can): optimum
// would stop at its first step with "not supported yet".
func ExportRefuses(arch string) string {
	if slices.Contains(shared.ArchitectureNames(exportArchitectures), arch) {
		return ""
	}
	return "optimum-onnx 0.1.0, which exports the ONNX model, has no text-generation export for model_type " + arch
}
