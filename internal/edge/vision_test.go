package edge

import (
	"errors"
	"strings"
	"testing"
)

func TestPickVisionBackboneByParams(t *testing.T) {
	for _, tc := range []struct {
		params   float64
		backbone string
		builtin  string
		warn     string
	}{
		{2.5e6, "MobileNetV3-Small", "builtin:mobilenetv3-small-digits", ""},
		{2_999_999, "MobileNetV3-Small", "builtin:mobilenetv3-small-digits", ""},
		{3e6, "EfficientNet-Lite0", "builtin:efficientnet-lite0", ""},
		{10e6, "EfficientNet-Lite0", "builtin:efficientnet-lite0", ""},
		{25e6, "EfficientNet-Lite0", "builtin:efficientnet-lite0", "past the platform guide's vision rule, which stops at 10M"},
	} {
		p, err := PickVision(VisionRequest{Platform: "laptop", Params: tc.params})
		if err != nil {
			t.Fatalf("%g: %v", tc.params, err)
		}
		if p.Backbone != tc.backbone || p.Builtin != tc.builtin {
			t.Errorf("%g parameters: backbone %q (%q), want %q (%q)", tc.params, p.Backbone, p.Builtin, tc.backbone, tc.builtin)
		}
		if got := strings.Join(p.Warnings, "\n"); tc.warn == "" && got != "" || !strings.Contains(got, tc.warn) {
			t.Errorf("%g parameters: warnings %q, want %q", tc.params, got, tc.warn)
		}
	}
}

func TestPickVisionRuntimeByPlatform(t *testing.T) {
	for platform, want := range map[string]struct{ runtime, format string }{
		"ios":         {"Core ML", "coreml-int8"},
		"android":     {"TFLite (LiteRT)", "tflite-int8"},
		"jetson-nano": {"TensorRT", "tensorrt-int8"},
		"intel-npu":   {"OpenVINO", "openvino-int8"},
		"laptop":      {"ONNX Runtime (CPU)", "onnx-int8"},
	} {
		p, err := PickVision(VisionRequest{Platform: platform, Params: 2e6})
		if err != nil {
			t.Fatal(err)
		}
		if p.Runtime != want.runtime || p.Format != want.format {
			t.Errorf("%s: %s / %s, want %s / %s", platform, p.Runtime, p.Format, want.runtime, want.format)
		}
		// A format without a pipeline says what this build converts instead.
		built := map[string]bool{"onnx-int8": true, "tflite-int8": true, "coreml-int8": true, "openvino-int8": true, "tensorrt-int8": true, "qnn-int8": true}[p.Format]
		if p.Built != built || !built && p.Buildable != "onnx-int8" {
			t.Errorf("%s: built %t, buildable %q", platform, p.Built, p.Buildable)
		}
	}
	// TensorRT's engine is built on the device: the pick says so.
	if p, _ := PickVision(VisionRequest{Platform: "jetson-nano", Params: 2e6}); !strings.Contains(strings.Join(p.Warnings, "\n"), "builds the engine on the device") {
		t.Errorf("jetson-nano: warnings %q do not say where the engine is built", p.Warnings)
	}
	// Every platform the LLM picker knows has a vision rule.
	for _, name := range Platforms() {
		if _, err := PickVision(VisionRequest{Platform: name, Params: 2e6}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	var unknown *UnknownPlatformError
	if _, err := PickVision(VisionRequest{Platform: "fridge", Params: 2e6}); !errors.As(err, &unknown) {
		t.Errorf("unknown platform: %v", err)
	}
}

func TestParseParams(t *testing.T) {
	for in, want := range map[string]float64{"2500000": 2.5e6, "2.5M": 2.5e6, "800K": 8e5, "1.2b": 1.2e9, " 3m ": 3e6} {
		if got, err := ParseParams(in); err != nil || got != want {
			t.Errorf("ParseParams(%q) = %g, %v; want %g", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "-2M", "two", "NaN", "Inf"} {
		if _, err := ParseParams(in); err == nil {
			t.Errorf("ParseParams(%q) passed", in)
		}
	}
}
