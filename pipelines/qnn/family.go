// Package qnn is the QNN format family (Qualcomm Hexagon): the onnx
// family's static-shape prefill export, ONNX Runtime's QNN QDQ flow
// calibrated on the recipe's text, then by default a Hexagon context binary
// compiled by QNN's HTP backend (onnxruntime-qnn) for the device's SoC and
// gated on the HTP simulator; or the QDQ model gated on ONNX Runtime's CPU
// provider (ort-qdq), optionally compiled by Qualcomm AI Hub or the QNN SDK
// (not run here: stand-ins in tests).
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
					Note: "INT8 weights (per output channel with qnn-htp) and 16-bit activations: a Hexagon context binary compiled by QNN's HTP backend (onnxruntime-qnn) and gated on its HTP simulator here; not run on a phone here"},
				{Name: "qnn-w4a16", Family: "qnn", BitsPerWeight: 4, RunsHere: "partly",
					Note: "INT4 weights (per output channel) and 16-bit activations: a Hexagon context binary compiled by QNN's HTP backend and gated on its HTP simulator here; not run on a phone here"},
			},
		},
		Options: func(string) any { return &Options{} },
		Expand:  expandQNN,
		// The QDQ model is made from the ONNX family's export.
		Refuses: func(_, arch string) string { return onnx.ExportRefuses(arch) },
		Kinds:   []steps.Kind{qnnQDQ{}, qnnCompile{}, qnnHTP{}},
		Helpers: toolchain.Dir(python, "python"),
		Toolchains: []toolchain.Spec{toolchain.Python(Toolchain, locks, []string{ToolHTP},
			"onnxruntime-qnn 2.7.0 with QNN 2.51.0's HTP backend (backend: qnn-htp): compiles Hexagon context binaries and runs them "+
				"on Qualcomm's HTP simulator (x86-64 Linux, glibc 2.35+); no phone is used").
			WithPackages("python", "onnxruntime-qnn", "onnxruntime", "torch", "transformers").
			// QNN's HTP backend is a manylinux_2_35 x86-64 library: registering
			// the plugin execution provider loads it, so an older glibc fails here.
			WithSmokeImport("import onnxruntime, onnxruntime_qnn; onnxruntime.register_execution_provider_library(" +
				"'QNNExecutionProvider', onnxruntime_qnn.get_library_path())").
			WithExtraVersion(qnnSDKVersion),
			toolchain.External(SDK, []string{ToolONNXConverter, ToolModelLibGenerator, ToolContextBinaryGenerator},
				"not run here (stand-in in tests): needs Qualcomm's full QNN SDK (set QNN_SDK_ROOT and put $QNN_SDK_ROOT/bin/x86_64-linux-clang on "+
					"--tool-path); only used by QNN targets with `backend: qnn-sdk`")},
		ToolsFrom: map[string][]string{onnx.Toolchain: {ToolQDQ, ToolAIHub}},
		Notes:     QNNWeightCheck,
	}
}

// Options are a QNN target's with: options.
type Options struct {
	onnx.ExportOptions `yaml:",inline"`
	Backend            *string  `yaml:"backend" enum:"qnn-htp,ort-qdq,ai-hub,qnn-sdk" doc:"What makes the published model: qnn-htp (the default: a Hexagon context binary and its EPContext wrapper, compiled by QNN's HTP backend from onnxruntime-qnn for the device's SoC and gated on the HTP simulator), ort-qdq (the QDQ model, gated on ONNX Runtime's CPU provider), ai-hub (a context binary from Qualcomm AI Hub's compile job) or qnn-sdk (one from the local QNN SDK); ai-hub and qnn-sdk are not run by edgepipe's tests (stand-ins)."`
	MinTop1            *float64 `yaml:"min_top1_agreement" min:"0" doc:"backend qnn-htp: the least share of positions of the first evaluation chunk where the compiled model, on the HTP simulator, picks PyTorch's top-1 token (default 0.6 for qnn-w8a16, 0.5 for qnn-w4a16; under it fails the target)."`
	GateChunks         *int     `yaml:"gate_chunks" min:"1" doc:"backend qnn-htp: the evaluation chunks the HTP simulator scores, when fewer than the recipe's max_chunks (the simulator takes minutes per chunk); the baseline is scored on the same chunks."`
	Samples            *int     `yaml:"samples" min:"1" doc:"Calibration windows of the recipe's calibration text (default 4)."`
	HubDevice          *string  `yaml:"hub_device" doc:"backend ai-hub: the Qualcomm AI Hub device name (default: the one known for the target's device)."`
	DSPArch            *string  `yaml:"dsp_arch" doc:"backend qnn-sdk: the Hexagon architecture (v73, v75, ...; default: the one known for the target's device)."`
	HubTimeoutS        *int     `yaml:"hub_timeout_s" min:"1" doc:"backend ai-hub: seconds to wait for the compile job (default 1800)."`
}

func (o *Options) backend() string {
	if o == nil || o.Backend == nil {
		return QNNBackendHTP
	}
	return *o.Backend
}

// Export returns the options of the onnx family's export and validation,
// which QNN targets share.
func (o *Options) Export() *onnx.ExportOptions { return &o.ExportOptions }
