package recipe

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fakeCatalog is a small device catalog with the compatibility rules the
// validator must enforce: WebGPU loads only MLC weights, Core ML runs only
// on Apple devices.
type fakeCatalog struct{}

var (
	fakeDevices = []string{"apple-a18", "apple-m3-max", "webgpu-m3-max", "x86-laptop",
		"generic-x86-laptop", "snapdragon-8-gen-3", "jetson-orin-nano-super"}
	fakeFormats = []string{"gguf-q4_k_m", "gguf-q8_0", "gguf-f16", "mlc-q4f16_1", "coreml-int4", "qnn-w4a16"}
	fakeKinds   = []string{"fetch", "gguf-convert", "gguf-quantize", "imatrix", "perplexity", "run"}
)

func (fakeCatalog) DeviceIDs() []string          { return fakeDevices }
func (fakeCatalog) HasDevice(id string) bool     { return slices.Contains(fakeDevices, id) }
func (fakeCatalog) FormatNames() []string        { return fakeFormats }
func (fakeCatalog) ValidFormat(name string) bool { return slices.Contains(fakeFormats, name) }

func (fakeCatalog) BenchBackend(format string) (string, bool) {
	if strings.HasPrefix(format, "gguf-") {
		return "llama.cpp", true
	}
	return "", false
}

// fakeGGUFOptions stands in for a family's typed options.
type fakeGGUFOptions struct {
	Imatrix bool `yaml:"imatrix" doc:"calibrate with an importance matrix"`
}

func (fakeCatalog) Options(format string) any {
	if strings.HasPrefix(format, "gguf-") {
		return &fakeGGUFOptions{}
	}
	return nil
}

func (fakeCatalog) KVFix(string, string, string) string { return "" }

// The image-classification formats, which the catalog's text formats do
// not list.
func (fakeCatalog) TaskFormats(task string) []string {
	if task == TaskImageClassification {
		return []string{"onnx-fp32", "onnx-int8", "coreml-int8"}
	}
	return nil
}

// TaskBench: the ONNX formats run here, Core ML does not.
func (fakeCatalog) TaskBench(task, format string) (string, bool) {
	if task == TaskImageClassification && strings.HasPrefix(format, "onnx-") {
		return "onnxruntime", true
	}
	return "", false
}

func (fakeCatalog) TaskOptions(task, format string) any {
	if task == TaskImageClassification && format == "onnx-int8" {
		return &fakeInt8Options{}
	}
	return nil
}

type fakeInt8Options struct {
	KeepStem *bool `yaml:"keep_stem_float" doc:"keep the stem in float"`
}

func (fakeCatalog) CheckSource(src string) error {
	if strings.HasPrefix(src, "ftp://") {
		return errors.New("no fetcher for this source")
	}
	return nil
}

func (fakeCatalog) CanRun(device, format string) (bool, string) {
	switch {
	case strings.HasPrefix(device, "webgpu-") && !strings.HasPrefix(format, "mlc-"):
		return false, "use mlc-q4f16_1: WebLLM loads MLC q4f16_1 weights, not " + format
	case strings.HasPrefix(format, "mlc-") && !strings.HasPrefix(device, "webgpu-"):
		return false, "use gguf-q4_k_m: llama.cpp loads GGUF weights; MLC weights need a WebGPU browser"
	case strings.HasPrefix(format, "coreml-") && !strings.HasPrefix(device, "apple-"):
		return false, "use gguf-q4_k_m: Core ML runs only on Apple devices"
	case strings.HasPrefix(format, "qnn-") && !strings.HasPrefix(device, "snapdragon-"):
		return false, "use gguf-q4_k_m: QNN needs a Qualcomm Hexagon NPU"
	}
	return true, ""
}

func TestValidate(t *testing.T) {
	pos := func(line, col int) Pos { return Pos{File: "r.yaml", Line: line, Col: col} }
	target := func(name, device, format string, line int) Target {
		return Target{Name: name, Device: device, Format: format,
			Pos: pos(line, 3), DevicePos: pos(line+1, 13), FormatPos: pos(line+2, 13)}
	}
	cases := []struct {
		name    string
		targets []Target
		steps   []StepSpec
		kinds   []string
		want    []string // one substring per diagnostic, in order
	}{
		{name: "valid",
			targets: []Target{target("a", "apple-m3-max", "gguf-q4_k_m", 10), target("b", "webgpu-m3-max", "mlc-q4f16_1", 20)},
			steps: []StepSpec{{ID: "smoke", Uses: "run", Needs: []string{"a", "b", "perplexity:q4_k_m", "source"},
				NeedsPos: []Pos{pos(31, 5), pos(31, 8), pos(31, 11), pos(31, 30)}}},
			kinds: fakeKinds},
		{name: "unknown device close",
			targets: []Target{target("a", "apple-m3max", "gguf-q4_k_m", 10)},
			want:    []string{`r.yaml:11:13: target "a": unknown device "apple-m3max"` + "\n  hint: did you mean \"apple-m3-max\"?"}},
		{name: "unknown device far lists some",
			targets: []Target{target("a", "toaster", "gguf-q4_k_m", 10)},
			want:    []string{"hint: known devices: apple-a18, apple-m3-max"}},
		{name: "unknown format",
			targets: []Target{target("a", "apple-m3-max", "gguf-q4km", 10)},
			want:    []string{`r.yaml:12:13: target "a": unknown format "gguf-q4km"` + "\n  hint: did you mean \"gguf-q4_k_m\"?"}},
		{name: "unknown device and format: no compatibility noise",
			targets: []Target{target("a", "toaster", "safetensors", 10)},
			want:    []string{`unknown device "toaster"`, `unknown format "safetensors"`}},
		{name: "device cannot run format",
			targets: []Target{target("web", "webgpu-m3-max", "gguf-q4_k_m", 10)},
			want:    []string{`r.yaml:12:13: target "web": no runtime on webgpu-m3-max loads gguf-q4_k_m` + "\n  hint: use mlc-q4f16_1"}},
		{name: "missing device or format is the parser's report, not ours",
			targets: []Target{target("a", "", "gguf-q4_k_m", 10), target("b", "x86-laptop", "", 20)}},
		{name: "step named like a target",
			targets: []Target{target("cpu", "x86-laptop", "gguf-q8_0", 10)},
			steps:   []StepSpec{{ID: "cpu", Uses: "run", Pos: pos(30, 3)}},
			want:    []string{`r.yaml:30:3: step "cpu" has the same name as the target on line 10`}},
		{name: "needs unknown, with suggestion and position of the entry",
			targets: []Target{target("laptop-q4km", "x86-laptop", "gguf-q4_k_m", 10)},
			steps: []StepSpec{{ID: "smoke", Uses: "run", Pos: pos(30, 3),
				Needs: []string{"laptop-q4", "gguf-quantize:q4_k_m", "zzz"}, NeedsPos: []Pos{pos(32, 13), pos(32, 24), pos(32, 47)}}},
			want: []string{`r.yaml:32:13: step "smoke" needs "laptop-q4", which is neither a target nor a step` + "\n  hint: did you mean \"laptop-q4km\"?",
				`r.yaml:32:47: step "smoke" needs "zzz"`}},
		{name: "needs another step",
			targets: []Target{target("cpu", "x86-laptop", "gguf-q8_0", 10)},
			steps:   []StepSpec{{ID: "a", Uses: "run", Needs: []string{"b"}}, {ID: "b", Uses: "run"}}},
		{name: "unknown uses",
			targets: []Target{target("cpu", "x86-laptop", "gguf-q8_0", 10)},
			steps:   []StepSpec{{ID: "smoke", Uses: "rnu", UsesPos: pos(31, 11)}, {ID: "up", Uses: "s3-upload", UsesPos: pos(33, 11)}},
			kinds:   fakeKinds,
			want: []string{`r.yaml:31:11: step "smoke" uses "rnu", which is not a step kind` + "\n  hint: did you mean \"run\"?",
				`r.yaml:33:11: step "up" uses "s3-upload", which is not a step kind` + "\n  hint: step kinds: fetch, gguf-convert"}},
		{name: "nil kinds skips the kind check",
			targets: []Target{target("cpu", "x86-laptop", "gguf-q8_0", 10)},
			steps:   []StepSpec{{ID: "smoke", Uses: "whatever"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &Recipe{Targets: c.targets, Steps: c.steps}
			diags := Validate(r, fakeCatalog{}, c.kinds)
			if len(diags) != len(c.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%v", len(diags), len(c.want), diags)
			}
			for i, w := range c.want {
				if !strings.Contains(diags[i].String(), w) {
					t.Errorf("diagnostic %d:\n%s\ndoes not contain\n%s", i, diags[i], w)
				}
			}
		})
	}
}
