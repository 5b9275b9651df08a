package catalog_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	. "github.com/edgepipe/edgepipe/internal/catalog"
	_ "github.com/edgepipe/edgepipe/pipelines"
)

func TestEmbeddedCatalogParses(t *testing.T) {
	devs, err := ParseDevices(DevicesYAML)
	if err != nil {
		t.Fatalf("devices.yaml: %v", err)
	}
	if len(devs) != len(DeviceIDs()) {
		t.Fatalf("parsed %d devices, DeviceIDs has %d", len(devs), len(DeviceIDs()))
	}
}

func TestRequiredDevices(t *testing.T) {
	ids := DeviceIDs()
	for _, want := range []string{
		"apple-a18", "apple-m4", "apple-m3-max", "webgpu-m3-max", "webgpu-android",
		"snapdragon-8-gen-3", "snapdragon-x-elite", "jetson-orin-nano-super", "jetson-agx-orin",
		"jetson-thor", "x86-laptop", "nvidia-a100", "nvidia-h100",
	} {
		if !slices.Contains(ids, want) {
			t.Errorf("DeviceIDs lacks %q", want)
		}
	}
	if slices.Contains(ids, "generic-x86-laptop") {
		t.Error("DeviceIDs lists an alias")
	}
	var fromDevices []string
	for _, d := range Devices() {
		fromDevices = append(fromDevices, d.ID)
	}
	if !slices.Equal(ids, fromDevices) {
		t.Errorf("DeviceIDs %v and Devices %v disagree on order", ids, fromDevices)
	}
}

func TestLookupResolvesAliases(t *testing.T) {
	for _, tc := range []struct{ in, id string }{
		{"generic-x86-laptop", "x86-laptop"},
		{"x86-laptop", "x86-laptop"},
		{"apple-a18", "apple-a18"},
	} {
		d, ok := Lookup(tc.in)
		if !ok || d.ID != tc.id {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tc.in, d.ID, ok, tc.id)
		}
	}
	for _, in := range []string{"", "Apple-A18", "apple-a17", "generic"} {
		if _, ok := Lookup(in); ok {
			t.Errorf("Lookup(%q) found a device", in)
		}
	}
}

// The domain brief's figures: bandwidth and observed tok/s for an 8B Q4
// model of 4.7 GB.
func TestBriefFigures(t *testing.T) {
	for _, tc := range []struct {
		id        string
		bandwidth float64
		tokS      float64
	}{
		{"apple-a18", 60, 8},
		{"snapdragon-8-gen-3", 77, 7},
		{"webgpu-m3-max", 400, 41},
		{"jetson-agx-orin", 205, 45},
		{"apple-m3-max", 400, 55},
		{"webgpu-android", 77, 6}, // midpoint of the brief's 4-8
	} {
		d, ok := Lookup(tc.id)
		if !ok {
			t.Fatalf("no device %q", tc.id)
		}
		if d.MemoryBandwidthGBs != tc.bandwidth {
			t.Errorf("%s: bandwidth %v, want %v", tc.id, d.MemoryBandwidthGBs, tc.bandwidth)
		}
		o, ok := d.ObservationFor(4.7)
		if !ok || o.TokS != tc.tokS || o.Source != "platform guide" {
			t.Errorf("%s: observation for 4.7 GB = %+v, %v; want %v tok/s from the brief", tc.id, o, ok, tc.tokS)
		}
	}
	a18, _ := Lookup("apple-a18")
	if !slices.ContainsFunc(a18.Observed, func(o Observation) bool { return o.TokS == 3 }) {
		t.Error("apple-a18 lacks the iPhone 16 Pro 3 tok/s observation")
	}
	// The formats table's A100 figures (Llama 3 70B): kept, but with no
	// size the ceiling math may use, since card count and batch are unknown.
	a100, _ := Lookup("nvidia-a100")
	for _, want := range []float64{38, 55, 75} {
		i := slices.IndexFunc(a100.Observed, func(o Observation) bool { return o.TokS == want })
		if i < 0 || a100.Observed[i].ModelGB != 0 {
			t.Errorf("nvidia-a100: no ceiling-free observation of %v tok/s: %+v", want, a100.Observed)
		}
	}
	if _, ok := a100.ObservationFor(35); ok {
		t.Error("nvidia-a100: an observation claims a usable size, so a multi-card figure would set the ceiling share")
	}
}

func TestVendorSpecs(t *testing.T) {
	for _, tc := range []struct {
		id                   string
		bandwidth, memory    float64
		platform, family     string
		preferredFormatStart string
	}{
		{"apple-a18", 60, 8, "ios", "apple-ane", "coreml-int4"},
		{"apple-m4", 120, 16, "macos", "apple-ane", "gguf-q4_k_m"},
		{"apple-m3-max", 400, 48, "macos", "apple-ane", "gguf-q4_k_m"},
		{"webgpu-m3-max", 400, 48, "browser", "webgpu", "mlc-q4f16_1"},
		{"webgpu-android", 77, 12, "browser", "webgpu", "mlc-q4f32_1"},
		{"snapdragon-8-gen-3", 77, 12, "android", "qualcomm-hexagon", "qnn-"},
		{"snapdragon-x-elite", 135, 16, "laptop", "qualcomm-hexagon", "qnn-"},
		{"jetson-orin-nano-super", 102, 8, "jetson", "nvidia-jetson", "gguf-q4_k_m"},
		{"jetson-agx-orin", 205, 64, "jetson", "nvidia-jetson", "trtllm-int4"},
		{"jetson-thor", 273, 128, "jetson", "nvidia-jetson", "nvfp4"},
		{"x86-laptop", 89.6, 16, "laptop", "cpu", "gguf-q4_k_m"},
		{"nvidia-a100", 2039, 80, "gpu-server", "nvidia-gpu", "awq-"},
		{"nvidia-h100", 3350, 80, "gpu-server", "nvidia-gpu", "awq-"},
	} {
		d, _ := Lookup(tc.id)
		if d.MemoryBandwidthGBs != tc.bandwidth || d.MemoryGB != tc.memory ||
			d.Platform != tc.platform || d.Family != tc.family ||
			!strings.HasPrefix(d.PreferredFormat, tc.preferredFormatStart) {
			t.Errorf("%s = %v GB/s, %v GB, %s, %s, prefers %s; want %v, %v, %s, %s, %s*", tc.id,
				d.MemoryBandwidthGBs, d.MemoryGB, d.Platform, d.Family, d.PreferredFormat,
				tc.bandwidth, tc.memory, tc.platform, tc.family, tc.preferredFormatStart)
		}
	}
}

func TestRuntimeFor(t *testing.T) {
	for _, tc := range []struct{ device, format, runtime string }{
		{"webgpu-m3-max", "mlc-q4f16_1", "WebLLM"},
		{"webgpu-m3-max", "gguf-q4_k_m", ""},
		{"webgpu-android", "gguf-q8_0", ""},
		{"apple-a18", "coreml-int4", "Core ML"},
		{"apple-a18", "gguf-q4_k_m", "llama.cpp"},
		{"apple-a18", "qnn-w8a16", ""},
		{"apple-m3-max", "gguf-q4_k_m", "llama.cpp"},
		{"snapdragon-8-gen-3", "qnn-w8a16", "QNN"},
		{"snapdragon-8-gen-3", "onnx-int4", "ONNX Runtime"},
		{"snapdragon-8-gen-3", "mlc-q4f16_1", ""},
		{"jetson-orin-nano-super", "gguf-q4_k_m", "llama.cpp"},
		{"jetson-orin-nano-super", "trtllm-int4", "TensorRT-LLM"},
		{"jetson-orin-nano-super", "nvfp4", ""},
		{"jetson-agx-orin", "nvfp4", ""},
		{"jetson-agx-orin", "trtllm-int4", "TensorRT Edge-LLM"},
		{"jetson-thor", "nvfp4", "TensorRT Edge-LLM"},
		{"jetson-thor", "awq-w4a16", "vLLM"},
		{"x86-laptop", "gguf-f16", "llama.cpp"},
		{"x86-laptop", "coreml-int4", ""},
		{"nvidia-a100", "gptq-w4a16", "vLLM"},
		{"nvidia-a100", "nvfp4", ""},
		{"nvidia-h100", "trtllm-int4", "TensorRT-LLM"},
		// gguf-* covers known types only.
		{"x86-laptop", "gguf-bogus", ""},
		{"x86-laptop", "gguf-", ""},
	} {
		d, ok := Lookup(tc.device)
		if !ok {
			t.Fatalf("no device %q", tc.device)
		}
		if got := d.RuntimeFor(tc.format); got != tc.runtime {
			t.Errorf("%s.RuntimeFor(%s) = %q, want %q", tc.device, tc.format, got, tc.runtime)
		}
		if got := d.Runs(tc.format); got != (tc.runtime != "") {
			t.Errorf("%s.Runs(%s) = %v", tc.device, tc.format, got)
		}
	}
}

func TestDevicesReturnsCopies(t *testing.T) {
	devs := Devices()
	devs[0].Runtimes[0].Formats[0] = "mutated"
	devs[0].Sources["memory_gb"] = "mutated"
	d, _ := Lookup(devs[0].ID)
	if d.Runtimes[0].Formats[0] == "mutated" || d.Sources["memory_gb"] == "mutated" {
		t.Error("mutating Devices() changed the catalog")
	}
}

func TestDeviceJSON(t *testing.T) {
	d, _ := Lookup("apple-a18")
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"id", "name", "family", "platform", "memory_bandwidth_gb_s", "memory_gb",
		"npu_tops", "os_reserved_gb", "needs_nvidia_gpu", "runtimes", "observed", "sources"} {
		if _, ok := m[key]; !ok {
			t.Errorf("device JSON lacks %q: %s", key, b)
		}
	}
	if m["memory_bandwidth_gb_s"] != 60.0 {
		t.Errorf("memory_bandwidth_gb_s = %v", m["memory_bandwidth_gb_s"])
	}
}

const validDeviceYAML = `
- id: test-phone
  name: Test phone
  family: apple-ane
  platform: ios
  memory_bandwidth_gb_s: 60
  memory_gb: 8
  os_reserved_gb: 2
  preferred_format: coreml-int4
  runtimes:
    - name: Core ML
      loads: Core ML packages
      formats: [coreml-int4]
  sources:
    memory_bandwidth_gb_s: test
    memory_gb: test
    os_reserved_gb: test
`

func TestParseDevicesRejects(t *testing.T) {
	if _, err := ParseDevices([]byte(validDeviceYAML)); err != nil {
		t.Fatalf("the valid fixture fails: %v", err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"unknown field", "memory_gb: 8", "memory_gib: 8", "field memory_gib not found"},
		{"missing source", "    memory_gb: test\n", "", "memory_gb = 8 has no entry in sources"},
		{"unknown format", "formats: [coreml-int4]", "formats: [coreml-int4, gguf-q4km]", `unknown format "gguf-q4km"`},
		{"pattern matching nothing", "formats: [coreml-int4]", "formats: [coreml-int4, tensorflow-*]", `unknown format "tensorflow-*"`},
		{"preferred not loadable", "preferred_format: coreml-int4", "preferred_format: gguf-q4_k_m", "not loaded by any of its runtimes"},
		{"bad family", "family: apple-ane", "family: apple", `family "apple" is not one of`},
		{"bad platform", "platform: ios", "platform: iphone", `platform "iphone" is not one of`},
		{"reserve exceeds memory", "os_reserved_gb: 2", "os_reserved_gb: 9", "os_reserved_gb in [0, memory_gb)"},
		{"gpu flag disagrees", "os_reserved_gb: 2\n", "os_reserved_gb: 2\n  needs_nvidia_gpu: true\n", "needs_nvidia_gpu = true"},
		{"bad id", "id: test-phone", "id: Test_Phone", `id or alias "Test_Phone"`},
		{"observation without source", "  sources:", "  observed:\n    - {model: 8B, model_gb: 4.7, tok_s: 8}\n  sources:", "needs a model, tok_s > 0"},
	} {
		yamlText := strings.Replace(validDeviceYAML, tc.old, tc.new, 1)
		if yamlText == validDeviceYAML {
			t.Fatalf("%s: fixture edit did not apply", tc.name)
		}
		_, err := ParseDevices([]byte(yamlText))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	dup := validDeviceYAML + strings.Replace(validDeviceYAML, "id: test-phone", "id: other\n  aliases: [test-phone]", 1)
	if _, err := ParseDevices([]byte(dup)); err == nil || !strings.Contains(err.Error(), `name "test-phone" already used`) {
		t.Errorf("duplicate name: err = %v", err)
	}
	if _, err := ParseDevices([]byte("[]")); err == nil {
		t.Error("an empty catalog parses")
	}
}

func TestSnapdragonQNNSoCs(t *testing.T) {
	for id, want := range map[string][2]int{
		"snapdragon-8-gen-3": {57, 75}, "snapdragon-8-elite": {69, 79}, "snapdragon-8-gen-4": {69, 79}, "snapdragon-x-elite": {60, 73},
	} {
		d, ok := Lookup(id)
		if !ok {
			t.Fatalf("%s: not in the catalog", id)
		}
		if d.SoCModel != want[0] || d.HTPArch != want[1] || d.Sources["soc_model"] == "" || d.Sources["htp_arch"] == "" {
			t.Errorf("%s: soc_model %d, htp_arch %d (sources %q, %q), want %v", id, d.SoCModel, d.HTPArch, d.Sources["soc_model"], d.Sources["htp_arch"], want)
		}
	}
	bad := Device{ID: "x", Family: "apple-ane", SoCModel: 57, HTPArch: 75}
	if CheckQNNSoC(bad) == nil {
		t.Error("soc_model on a non-Hexagon device was accepted")
	}
}
