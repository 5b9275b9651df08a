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
		Options: func(string) any { return &Options{} },
		Expand:  expandQNN,
		Kinds:   []steps.Kind{qnnQDQ{}, qnnCompile{}},
		Toolchains: []toolchain.Spec{toolchain.External(SDK, []string{ToolONNXConverter, ToolModelLibGenerator, ToolContextBinaryGenerator},
			"not run here: needs Qualcomm's QNN SDK (set QNN_SDK_ROOT and put $QNN_SDK_ROOT/bin/x86_64-linux-clang on "+
				"--tool-path); only used by QNN targets with `backend: qnn-sdk`")},
		ToolsFrom: map[string][]string{onnx.Toolchain: {ToolQDQ, ToolAIHub}},
		Notes:     QNNWeightCheck,
	}
}

// Options are a QNN target's with: options.
type Options struct {
	onnx.ExportOptions `yaml:",inline"`
	Backend            *string `yaml:"backend" enum:"ort-qdq,ai-hub,qnn-sdk" doc:"What makes the published model: ort-qdq (the QDQ model ONNX Runtime's QNN execution provider loads; the default), ai-hub (a Hexagon context binary from Qualcomm AI Hub's compile job) or qnn-sdk (one from the local QNN SDK)."`
	Samples            *int    `yaml:"samples" min:"1" doc:"Calibration windows of the recipe's calibration text (default 4)."`
	HubDevice          *string `yaml:"hub_device" doc:"backend ai-hub: the Qualcomm AI Hub device name (default: the one known for the target's device)."`
	DSPArch            *string `yaml:"dsp_arch" doc:"backend qnn-sdk: the Hexagon architecture (v73, v75, ...; default: the one known for the target's device)."`
	HubTimeoutS        *int    `yaml:"hub_timeout_s" min:"1" doc:"backend ai-hub: seconds to wait for the compile job (default 1800)."`
}

func (o *Options) backend() string {
	if o == nil || o.Backend == nil {
		return QNNBackendORT
	}
	return *o.Backend
}

// Export returns the options of the onnx family's export and validation,
// which QNN targets share.
func (o *Options) Export() *onnx.ExportOptions { return &o.ExportOptions }
