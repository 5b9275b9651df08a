// Package qnn is the QNN format family (Qualcomm Hexagon): the onnx
// family's static-shape prefill export, ONNX Runtime's QNN QDQ flow
// calibrated on the recipe's text, the QDQ model gated on ONNX Runtime's CPU
// provider, and optionally a Hexagon context binary from Qualcomm AI Hub or
// the QNN SDK (not run here: stand-ins in tests).
package qnn

import (
	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/pipelines/onnx"
	"github.com/edgepipe/edgepipe/steps"
)

// Family is the QNN family, for registration.
func Family() plan.Family {
	return plan.Family{
		Name: "qnn",
		Formats: catalog.FormatSet{
			Labels: map[string]string{"qnn": "QNN"},
			Formats: []catalog.Format{
				{Name: "qnn-w8a16", Family: "qnn", BitsPerWeight: 8, RunsHere: "partly",
					Note: "QDQ ONNX, INT8 weights and 16-bit activations; the QDQ model runs on ONNX Runtime's CPU provider here, the Hexagon context binary needs the QNN SDK or Qualcomm AI Hub"},
				{Name: "qnn-w4a16", Family: "qnn", BitsPerWeight: 4, RunsHere: "partly",
					Note: "QDQ ONNX, INT4 weights and 16-bit activations; validated on the CPU provider here, compiled for Hexagon by the QNN SDK or Qualcomm AI Hub"},
			},
		},
		Expand: expandQNN,
		Kinds:  []steps.Kind{qnnQDQ{}, qnnCompile{}},
		Toolchains: []toolchain.Spec{toolchain.External(SDK, []string{ToolONNXConverter, ToolModelLibGenerator, ToolContextBinaryGenerator},
			"not run here: needs Qualcomm's QNN SDK (set QNN_SDK_ROOT and put $QNN_SDK_ROOT/bin/x86_64-linux-clang on "+
				"--tool-path); only used by QNN targets with `backend: qnn-sdk`")},
		ToolsFrom: map[string][]string{onnx.Toolchain: {ToolQDQ, ToolAIHub}},
		Notes:     QNNWeightCheck,
	}
}
