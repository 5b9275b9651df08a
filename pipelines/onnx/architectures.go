package onnx

import (
	_ "embed"

	"github.com/edgepipe/edgepipe/pipelines/shared"
)

// exportArchitectures is the pinned optimum-onnx's text-generation
// registry (python/tests/test_onnx_architectures.py keeps it equal).
//
//go:embed architectures.txt
var exportArchitecturesList string

var exportArchitectures = shared.ParseRegistry(exportArchitecturesList)

// ExportRefuses says why the ONNX export, which onnx-* and qnn-* targets
// start from, cannot take a model architecture ("" when it can): optimum
// would stop at its first step with "not supported yet".
func ExportRefuses(arch string) string {
	if exportArchitectures.Has(arch) {
		return ""
	}
	return exportArchitectures.Pinned + ", which export the ONNX model, have no text-generation export for model_type " + arch
}
