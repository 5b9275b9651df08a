package catalog_test

import (
	"strings"
	"testing"

	. "github.com/edgepipe/edgepipe/internal/catalog"
	_ "github.com/edgepipe/edgepipe/pipelines"
)

// validator is package pipelines' view of the catalog, restated here so the
// compiler checks Catalog against it without importing pipelines.
type validator interface {
	DeviceIDs() []string
	HasDevice(id string) bool
	FormatNames() []string
	ValidFormat(name string) bool
	CanRun(deviceID, format string) (ok bool, fix string)
}

var _ validator = Catalog{}

func TestCanRun(t *testing.T) {
	for _, tc := range []struct {
		device, format string
		ok             bool
		fix            string // exact when it does not start with "~", else a substring
	}{
		{"webgpu-m3-max", "gguf-q4_k_m", false, "use mlc-q4f16_1: no runtime on webgpu-m3-max (WebLLM, ONNX Runtime Web) loads gguf-q4_k_m; WebLLM loads MLC q4f16_1 or q4f32_1 weights"},
		{"webgpu-android", "gguf-q8_0", false, "use mlc-q4f32_1: no runtime on webgpu-android (WebLLM, ONNX Runtime Web) loads gguf-q8_0; WebLLM loads MLC q4f16_1 or q4f32_1 weights"},
		{"webgpu-m3-max", "coreml-int4", false, "use mlc-q4f16_1: no runtime on webgpu-m3-max (WebLLM, ONNX Runtime Web) loads coreml-int4; WebLLM loads MLC q4f16_1 or q4f32_1 weights"},
		{"webgpu-m3-max", "mlc-q4f16_1", true, ""},
		{"apple-a18", "coreml-int4", true, ""},
		{"apple-a18", "gguf-q4_k_m", true, ""},
		{"generic-x86-laptop", "gguf-q8_0", true, ""},
		{"apple-m3-max", "gguf-q4_k_m", true, ""},
		{"snapdragon-8-gen-3", "qnn-w4a16", true, ""},
		{"jetson-thor", "nvfp4", true, ""},
		{"apple-a18", "qnn-w8a16", false, "use coreml-int4: no runtime on apple-a18 (Core ML, llama.cpp) loads qnn-w8a16; Core ML loads Core ML packages (INT4 weights with FP16 activations for LLMs; W8A8 image classifiers), run on the ANE"},
		{"jetson-orin-nano-super", "nvfp4", false, "~use gguf-q4_k_m: jetson-orin-nano-super's GPU has no FP4 tensor cores"},
		{"jetson-agx-orin", "nvfp4", false, "use trtllm-int4: jetson-agx-orin's GPU has no FP4 tensor cores (tensor cores: fp16, int8), so nvfp4 does not run there; devices that run it: jetson-thor"},
		{"jetson-thor", "nvfp4", true, ""},
		{"nvidia-a100", "nvfp4", false, "~use awq-w4a16: "},
		{"x86-laptop", "mlc-q4f16_1", false, "~use gguf-q4_k_m: "},
		{"apple-a17", "coreml-int4", false, `~unknown device "apple-a17"; did you mean "apple-a18"?`},
		{"apple-a18", "gguf-q4km", false, `~unknown format "gguf-q4km"; did you mean "gguf-q4_k_m"?`},
	} {
		ok, fix := CanRun(tc.device, tc.format)
		if ok != tc.ok {
			t.Errorf("CanRun(%s, %s) ok = %v, want %v (fix %q)", tc.device, tc.format, ok, tc.ok, fix)
		}
		if want, sub := strings.CutPrefix(tc.fix, "~"); sub {
			if !strings.Contains(fix, want) {
				t.Errorf("CanRun(%s, %s) fix = %q, want it to contain %q", tc.device, tc.format, fix, want)
			}
		} else if fix != tc.fix {
			t.Errorf("CanRun(%s, %s) fix = %q, want %q", tc.device, tc.format, fix, tc.fix)
		}
	}
}

// Every device runs its preferred format, and every fix the catalog can
// produce names a format that then runs.
func TestEveryFixRuns(t *testing.T) {
	for _, d := range Devices() {
		if ok, fix := CanRun(d.ID, d.PreferredFormat); !ok {
			t.Errorf("%s cannot run its preferred %s: %s", d.ID, d.PreferredFormat, fix)
		}
		for _, f := range FormatNames() {
			ok, fix := CanRun(d.ID, f)
			if ok {
				continue
			}
			alt, _, found := strings.Cut(strings.TrimPrefix(fix, "use "), ":")
			if !strings.HasPrefix(fix, "use ") || !found {
				t.Errorf("CanRun(%s, %s) fix %q does not start with \"use FORMAT:\"", d.ID, f, fix)
				continue
			}
			if !d.Runs(alt) {
				t.Errorf("CanRun(%s, %s) suggests %s, which %s cannot run either", d.ID, f, alt, d.ID)
			}
		}
	}
}

// A device that runs some of a family is pointed at that family first.
func TestFixPrefersSameFamily(t *testing.T) {
	d := Device{ID: "onnx-box", PreferredFormat: "gguf-q4_k_m", Runtimes: []Runtime{
		{Name: "llama.cpp", Loads: "GGUF files", Formats: []string{"gguf-*"}},
		{Name: "ONNX Runtime", Loads: "fp32 ONNX models", Formats: []string{"onnx-fp32"}},
	}}
	want, _ := ParseFormat("onnx-int4")
	got := FixFor(d, want)
	if !strings.HasPrefix(got, "use onnx-fp32: ") || !strings.HasSuffix(got, "ONNX Runtime loads fp32 ONNX models") {
		t.Errorf("fixFor = %q", got)
	}
}

func TestCatalogAdapter(t *testing.T) {
	var c validator = Catalog{}
	if !c.HasDevice("generic-x86-laptop") || !c.HasDevice("apple-a18") || c.HasDevice("apple-a17") {
		t.Error("HasDevice disagrees with Lookup")
	}
	if !c.ValidFormat("gguf-q4_k_m") || c.ValidFormat("gguf-q4km") || c.ValidFormat("") {
		t.Error("ValidFormat disagrees with ParseFormat")
	}
	if len(c.DeviceIDs()) != len(DeviceIDs()) || len(c.FormatNames()) != len(FormatNames()) {
		t.Error("list lengths differ")
	}
	if ok, fix := c.CanRun("webgpu-m3-max", "gguf-q4_k_m"); ok || !strings.HasPrefix(fix, "use mlc-q4f16_1") {
		t.Errorf("CanRun = %v, %q", ok, fix)
	}
}

// An FP8 KV cache needs FP8 tensor cores: Thor and Hopper have them, no
// Ampere part does (Orin, A100).
func TestKVFix(t *testing.T) {
	for _, tc := range []struct{ device, format, kv, want string }{
		{"jetson-agx-orin", "trtllm-int4", "fp8", "jetson-agx-orin's GPU has no FP8 tensor cores (tensor cores: fp16, int8): write kv_dtype: f16, or q8"},
		{"jetson-agx-orin", "trtllm-int4", "q8", ""},
		{"jetson-agx-orin", "trtllm-int4", "f16", ""},
		{"jetson-thor", "nvfp4", "fp8", ""},
		{"jetson-thor", "nvfp4", "q8", "an NVFP4 engine's KV cache is FP16 or FP8"},
		{"nvidia-h100", "trtllm-int4", "fp8", ""},
		{"nvidia-a100", "trtllm-int4", "fp8", "nvidia-a100's GPU has no FP8 tensor cores"},
		{"jetson-agx-orin", "gguf-q4_k_m", "q4", ""}, // llama.cpp's own KV types
		{"jetson-thor", "trtllm-int4", "q4", "hold no 4-bit KV cache"},
	} {
		got := KVFix(tc.device, tc.format, tc.kv)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("KVFix(%s, %s, %s) = %q, want %q", tc.device, tc.format, tc.kv, got, tc.want)
		}
	}
}
