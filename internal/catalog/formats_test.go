package catalog_test

import (
	"math"
	"strings"
	"testing"

	. "github.com/edgepipe/edgepipe/internal/catalog"
	_ "github.com/edgepipe/edgepipe/pipelines"
)

func TestFormatNamesCoverTheDesign(t *testing.T) {
	names := FormatNames()
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("format %q listed twice", n)
		}
		seen[n] = true
		if n != strings.ToLower(n) {
			t.Errorf("format %q is not lower case", n)
		}
	}
	for _, want := range []string{
		"coreml-int4", "qnn-w8a16", "qnn-w4a16", "mlc-q4f16_1",
		"gguf-f16", "gguf-bf16", "gguf-q8_0", "gguf-q6_k", "gguf-q5_k_m", "gguf-q5_k_s", "gguf-q5_0",
		"gguf-q4_k_m", "gguf-q4_k_s", "gguf-q4_0", "gguf-q4_1", "gguf-q3_k_m", "gguf-q2_k", "gguf-iq4_xs",
		"onnx-fp32", "onnx-int4", "gptq-w4a16", "awq-w4a16", "trtllm-int4", "nvfp4",
	} {
		if !seen[want] {
			t.Errorf("FormatNames lacks %q", want)
		}
	}
	if got := len(Formats()); got != len(names) {
		t.Errorf("Formats has %d entries, FormatNames %d", got, len(names))
	}
}

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		name, family, ggufType string
		needsGPU               bool
		runsHere               string
	}{
		{"gguf-q4_k_m", "gguf", "Q4_K_M", false, "yes"},
		{"gguf-q8_0", "gguf", "Q8_0", false, "yes"},
		{"gguf-bf16", "gguf", "BF16", false, "yes"},
		{"gguf-iq2_xxs", "gguf", "IQ2_XXS", false, "yes"},
		{"coreml-int4", "coreml", "", false, "partly"},
		{"qnn-w4a16", "qnn", "", false, "partly"},
		{"mlc-q4f16_1", "mlc", "", false, "partly"},
		{"onnx-int4", "onnx", "", false, "yes"},
		{"awq-w4a16", "awq", "", false, "yes"},
		{"trtllm-int4", "trtllm", "", true, "no"},
		{"nvfp4", "nvfp4", "", true, "partly"},
	} {
		f, err := ParseFormat(tc.name)
		if err != nil {
			t.Errorf("ParseFormat(%q): %v", tc.name, err)
			continue
		}
		if f.Name != tc.name || f.Family != tc.family || f.GGUFType != tc.ggufType ||
			f.NeedsNVIDIAGPU != tc.needsGPU || f.RunsHere != tc.runsHere {
			t.Errorf("ParseFormat(%q) = %+v, want family %s, type %q, gpu %v, runs here %s",
				tc.name, f, tc.family, tc.ggufType, tc.needsGPU, tc.runsHere)
		}
	}
}

func TestParseFormatErrorsHint(t *testing.T) {
	for _, tc := range []struct{ in, hint string }{
		{"gguf-q4km", `did you mean "gguf-q4_k_m"?`},
		{"GGUF-Q4_K_M", `did you mean "gguf-q4_k_m"?`},
		{"gguf-q4_k", `did you mean "gguf-q4_k_m"?`}, // llama-quantize's alias
		{"mlc-q4f16", `did you mean "mlc-q4f16_1"?`},
		{"coreml_int4", `did you mean "coreml-int4"?`},
		{"tensorflow-lite-fp16", ""},
	} {
		_, err := ParseFormat(tc.in)
		if err == nil {
			t.Errorf("ParseFormat(%q) succeeded", tc.in)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, `unknown format "`+tc.in+`"`) || !strings.Contains(msg, "Valid formats:") {
			t.Errorf("ParseFormat(%q) error = %q", tc.in, msg)
		}
		if tc.hint == "" && strings.Contains(msg, "did you mean") {
			t.Errorf("ParseFormat(%q) suggests something: %q", tc.in, msg)
		}
		if tc.hint != "" && !strings.Contains(msg, tc.hint) {
			t.Errorf("ParseFormat(%q) error = %q, want %s", tc.in, msg, tc.hint)
		}
	}
}

func TestBitsPerWeight(t *testing.T) {
	// Derived from llama-quantize's Llama-3-8B sizes (GiB) or its quoted bpw.
	for _, tc := range []struct {
		name string
		bpw  float64
	}{
		{"gguf-q4_k_m", 4.90}, // 4.58 GiB
		{"gguf-q8_0", 8.51},   // 7.96 GiB
		{"gguf-q4_0", 4.64},   // 4.34 GiB
		{"gguf-q6_k", 6.57},   // 6.14 GiB
		{"gguf-iq4_xs", 4.25},
		{"gguf-f16", 16},
		{"gguf-f32", 32},
		{"mlc-q4f16_1", 4.5},
		{"gptq-w4a16", 4.125},
		{"nvfp4", 4.5},
	} {
		f, err := ParseFormat(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(f.BitsPerWeight-tc.bpw) > 0.005 {
			t.Errorf("%s: %v bits per weight, want %v", tc.name, f.BitsPerWeight, tc.bpw)
		}
	}
	// Llama-3-8B's own Q4_K_M file is 4.58 GiB, about 4.92 GB.
	f, _ := ParseFormat("gguf-q4_k_m")
	if got := EstimateWeightsGB(8030261248, f); math.Abs(got-4.92) > 0.01 {
		t.Errorf("EstimateWeightsGB(8B, q4_k_m) = %.3f, want 4.92", got)
	}
}

func TestFormatInvariants(t *testing.T) {
	imatrix := map[string]bool{"gguf-iq1_s": true, "gguf-iq1_m": true, "gguf-iq2_s": true,
		"gguf-iq2_xs": true, "gguf-iq2_xxs": true, "gguf-q2_k_s": true}
	for _, f := range Formats() {
		if f.Label() == "" {
			t.Errorf("%s: family %q has no label", f.Name, f.Family)
		}
		if f.RunsHere != "yes" && f.RunsHere != "partly" && f.RunsHere != "no" {
			t.Errorf("%s: RunsHere %q", f.Name, f.RunsHere)
		}
		if f.NeedsNVIDIAGPU && f.RunsHere == "yes" {
			t.Errorf("%s needs an NVIDIA GPU yet claims to run fully here", f.Name)
		}
		if f.BitsPerWeight < 1.5 || f.BitsPerWeight > 32 {
			t.Errorf("%s: implausible %v bits per weight", f.Name, f.BitsPerWeight)
		}
		if (f.Family == "gguf") != (f.GGUFType != "") {
			t.Errorf("%s: GGUFType %q does not match family %s", f.Name, f.GGUFType, f.Family)
		}
		if f.NeedsImatrix != imatrix[f.Name] {
			t.Errorf("%s: NeedsImatrix = %v", f.Name, f.NeedsImatrix)
		}
		if f.Note == "" {
			t.Errorf("%s has no note", f.Name)
		}
	}
}
