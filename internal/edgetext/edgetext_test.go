package edgetext

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/edge"
	_ "github.com/edgepipe/edgepipe/pipelines" // the devices and formats the catalog holds
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// golden compares got with testdata/name (or rewrites it under -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it); got:\n%s\n--- want:\n%s", path, got, want)
	}
}

var rows = []catalog.CeilingRow{
	{Device: "apple-a18", BandwidthGBs: 60, ModelGB: 0.5, CeilingTokS: 120, ObservedTokS: 84.5, ObservedOverCeiling: 0.704},
	{Device: "x86-laptop", BandwidthGBs: 6.5, ModelGB: 0.5, CeilingTokS: 13},
	{Device: "jetson-agx-orin", BandwidthGBs: 204.8, ModelGB: 0.5, CeilingTokS: 409.6, ObservedTokS: 450, ObservedOverCeiling: 1.0986},
}

func TestCeilingTable(t *testing.T) {
	var b bytes.Buffer
	if err := CeilingTable(&b, rows, "x86-laptop"); err != nil {
		t.Fatal(err)
	}
	golden(t, "ceiling.golden.txt", b.Bytes())
	b.Reset()
	if err := CeilingTable(&b, rows, ""); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<- target device") {
		t.Errorf("a table without a target device marks one:\n%s", b.String())
	}
}

func TestCeilingTargets(t *testing.T) {
	var b bytes.Buffer
	err := CeilingTargets(&b, []CeilingTarget{
		{Target: "phone", Device: "apple-a18", Format: "gguf-q4_k_m", ModelGB: 0.105, SizeFrom: "the published artifact", Devices: rows[:1]},
		{Target: "browser", Device: "webgpu-m3-max", Format: "mlc-q4f16_1", SizeFrom: "no published artifact and no model shape"},
		{Target: "laptop", Device: "x86-laptop", Format: "gguf-q8_0", ModelGB: 0.145, SizeFrom: "parameters x bits", Devices: rows[1:2]},
	})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "ceiling-targets.golden.txt", b.Bytes())
}

// picks are pick's answers: everything known, nothing known, and a model
// that does not fit its budget.
func picks() map[string]edge.Pick {
	shape := catalog.ModelShape{Layers: 30, KVHeads: 3, HeadDim: 64, Params: 134_515_008}
	full := edge.Pick{Platform: "ios", Summary: "iPhone 16 Pro, llama.cpp Metal", Device: "apple-a18", Format: "gguf-q4_k_m",
		KVDtype: "q8_0", Context: 4096, Conversion: "llama.cpp's convert_hf_to_gguf.py, then llama-quantize",
		Reasons:  []string{"llama.cpp runs on iOS through Metal", "q4_k_m keeps quality within the gate"},
		Warnings: []string{"decode may miss min_tokens_per_s 200"},
		Prediction: edge.Prediction{Model: edge.Model{Source: "hf://HuggingFaceTB/SmolLM2-135M-Instruct", Shape: shape, From: "config.json"},
			WeightsGB: 0.0807,
			Memory: &edge.MemoryCheck{Fit: catalog.Fit{WeightsGB: 0.08, KVGB: 0.05, OverheadGB: 0.3, NeedGB: 0.43, AvailableGB: 5.5},
				LimitGB: 5.5},
			Speed: &edge.Speed{BandwidthGBs: 60, ModelGB: 0.0807, CeilingTokS: 743.5, ExpectedTokS: 520.4,
				Observation: "84 tok/s for Llama-3.2-1B (0.75 GB, a field report) is 70% of its ceiling"},
			Notes: []string{"context 4096 assumed"}},
	}
	unknown := edge.Pick{Platform: "browser", Summary: "WebGPU", Device: "webgpu-m3-max", Format: "mlc-q4f16_1", KVDtype: "f16", Context: 2048,
		Prediction: edge.Prediction{Model: edge.Model{Source: "https://example.com/model"}}}
	tight := edge.Pick{Platform: "ios", Summary: "iPhone 16 Pro, llama.cpp Metal", Device: "apple-a18", Format: "gguf-q8_0", KVDtype: "f16", Context: 8192,
		Prediction: edge.Prediction{Model: edge.Model{Source: "builtin:smollm2-135m", Shape: shape, From: "built in"}, WeightsGB: 0.143,
			Memory: &edge.MemoryCheck{Fit: catalog.Fit{WeightsGB: 0.14, KVGB: 0.38, OverheadGB: 0.3, NeedGB: 0.82, AvailableGB: 5.5},
				LimitGB: 0.5, LimitIsBudget: true},
			Speed: &edge.Speed{BandwidthGBs: 60, ModelGB: 0.143, CeilingTokS: 419.6}}}
	return map[string]edge.Pick{"full": full, "unknown": unknown, "tight": tight}
}

func TestPrintPick(t *testing.T) {
	var all bytes.Buffer
	for _, tc := range []struct {
		name             string
		steps            []string
		missing, instead string
	}{
		{"full", []string{"source", "gguf-convert:f16", "gguf-quantize:q4_k_m", "publish:phone"}, "", ""},
		{"unknown", nil, "the mlc family is not in this build", "use gguf-q4_k_m with llama.cpp's WebGPU backend"},
		{"tight", []string{"source", "publish:x"}, "", ""},
	} {
		pk := picks()[tc.name]
		var b bytes.Buffer
		PrintPick(&b, pk, tc.steps, tc.missing, tc.instead)
		// The device line is the catalog's: checked against it here, so
		// the golden file does not repeat the catalog's numbers.
		d, ok := catalog.Lookup(pk.Device)
		if !ok {
			t.Fatalf("no device %s in the catalog", pk.Device)
		}
		deviceLine := fmt.Sprintf("device    %s: %s, %g GB/s, %g GB (%g GB left to apps)\n", d.ID, d.Name, d.MemoryBandwidthGBs, d.MemoryGB, d.MemoryGB-d.OSReservedGB)
		if !strings.Contains(b.String(), deviceLine) {
			t.Errorf("%s: no device line %q in:\n%s", tc.name, deviceLine, b.String())
		}
		fmt.Fprintf(&all, "== %s\n%s", tc.name, strings.Replace(b.String(), deviceLine, "device    $DEVICE\n", 1))
	}
	golden(t, "pick.golden.txt", all.Bytes())
}

func TestPrintVisionPick(t *testing.T) {
	var b bytes.Buffer
	vp := edge.VisionPick{Task: "image-classification", Platform: "ios", Summary: "iPhone, Core ML", Device: "apple-a18", Params: 2.5e6,
		Backbone: "MobileNetV3-Small", Builtin: "builtin:mobilenetv3-small-digits", Runtime: "Core ML on the ANE", Format: "coreml-int8", Built: true,
		Method: "per-channel symmetric INT8 weights", Gate: "top-1 drop at most 1 point", Decide: "compare the decision table's p95",
		Reasons: []string{"the ANE runs INT8 weights"}}
	PrintVisionPick(&b, vp)
	b.WriteString("== not built, no built-in model\n")
	vp.Builtin, vp.Built, vp.Format, vp.Buildable, vp.Reasons, vp.Warnings = "", false, "qnn-int8", "onnx-int8", nil, []string{"no NPU measurement"}
	PrintVisionPick(&b, vp)
	golden(t, "vision-pick.golden.txt", b.Bytes())
}
