package edge

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var smol = ResolveModel("builtin:smollm2-135m", "")

// The domain brief's picker, platform by platform, for a model that fits
// everywhere.
func TestPickFollowsTheBrief(t *testing.T) {
	for _, tc := range []struct {
		platform, device, format, kv string
	}{
		{"ios", "apple-a18", "coreml-int4", "f16"},
		{"android", "snapdragon-8-gen-3", "qnn-w4a16", "f16"},
		{"windows-arm", "snapdragon-x-elite", "qnn-w4a16", "f16"},
		{"browser", "webgpu-android", "mlc-q4f32_1", "f16"},
		{"jetson-nano", "jetson-orin-nano-super", "gguf-q4_k_m", "f16"},
		{"jetson-agx", "jetson-agx-orin", "trtllm-int4", "f16"}, // not the brief's NVFP4: Orin has no FP4/FP8 tensor cores
		{"jetson-thor", "jetson-thor", "nvfp4", "fp8"},
		{"laptop", "x86-laptop", "gguf-q4_k_m", "f16"},
		{"intel-npu", "intel-lunar-lake", "openvino-int4", "f16"},
		{"amd-npu", "amd-ryzen-ai-300", "onnx-int4", "f16"}, // Ryzen AI's own NPU format is not one edgepipe makes
		{"gpu", "nvidia-a100", "awq-w4a16", "f16"},
	} {
		p, err := PickTarget(PickRequest{Platform: tc.platform, Model: smol})
		if err != nil {
			t.Fatal(err)
		}
		if p.Device != tc.device || p.Format != tc.format || p.KVDtype != tc.kv || p.Context != DefaultContext {
			t.Errorf("%s: %s on %s, KV %s, context %d; want %s on %s, KV %s", tc.platform, p.Format, p.Device, p.KVDtype, p.Context, tc.format, tc.device, tc.kv)
		}
		if len(p.Reasons) < 2 || len(p.Warnings) != 0 || p.Conversion == "" || p.Prediction.Memory == nil || !p.Prediction.Memory.OK() {
			t.Errorf("%s: %+v", tc.platform, p)
		}
	}
	if got := Platforms(); strings.Join(got, " ") != "ios android windows-arm browser jetson-nano jetson-agx jetson-thor laptop intel-npu amd-npu gpu" {
		t.Errorf("platforms %v", got)
	}
}

// The brief's known failure: 8B Q4 on an iPhone decodes at single-digit
// tok/s. Asking for 10 warns, with a smaller model and fewer bits.
func TestPickWarnsWhenTheBudgetIsOutOfReach(t *testing.T) {
	p, err := PickTarget(PickRequest{Platform: "ios", Model: llama3Model(), MinTokensPerS: 10})
	if err != nil {
		t.Fatal(err)
	}
	if p.Device != "apple-a18" || p.Format != "coreml-int4" || len(p.Warnings) != 1 {
		t.Fatalf("%+v", p)
	}
	w := p.Warnings[0]
	for _, want := range []string{"min_tokens_per_s 10 will likely be missed on apple-a18", "ceiling is 13.3 tok/s", "about 8.3 tok/s",
		"a smaller model (at most 6.68B parameters in coreml-int4, 3.76 GB of weights)", "fewer bits: format: gguf-iq3_m", "runs on llama.cpp"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q lacks %q", w, want)
		}
	}
}

func TestPickFallsBackToTheNextCandidate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		req      PickRequest
		device   string
		format   string
		notFirst string
	}{
		{"browser: Android Chrome too slow, desktop fast enough",
			PickRequest{Platform: "browser", Model: llama3Model(), MinTokensPerS: 20},
			"webgpu-m3-max", "mlc-q4f16_1", "not mlc-q4f32_1 on webgpu-android: min_tokens_per_s 20 is out of reach"},
		{"laptop: only the M3 Max reaches 25 tok/s",
			PickRequest{Platform: "laptop", Model: llama3Model(), MinTokensPerS: 25},
			"apple-m3-max", "gguf-q4_k_m", "not gguf-q4_k_m on apple-m4: min_tokens_per_s 25 is out of reach"},
		{"jetson-nano: 8B Q4_K_M does not fit in 8 GB, TensorRT-LLM INT4 does",
			PickRequest{Platform: "jetson-nano", Model: llama3Model()},
			"jetson-orin-nano-super", "trtllm-int4", "not gguf-q4_k_m on jetson-orin-nano-super: does not fit in memory"},
	} {
		p, err := PickTarget(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		if p.Device != tc.device || p.Format != tc.format || len(p.Warnings) != 0 {
			t.Errorf("%s: %s on %s, warnings %q", tc.name, p.Format, p.Device, p.Warnings)
		}
		if !strings.Contains(strings.Join(p.Reasons, "\n"), tc.notFirst) {
			t.Errorf("%s: reasons %q lack %q", tc.name, p.Reasons, tc.notFirst)
		}
	}
}

func TestPickWhenNothingFits(t *testing.T) {
	p, err := PickTarget(PickRequest{Platform: "android", Model: llama3Model(), MaxMemoryGB: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p.Format != "qnn-w4a16" || len(p.Warnings) != 2 || !strings.Contains(p.Warnings[0], "over its max_memory_gb of 2") ||
		!strings.Contains(p.Warnings[1], "the other candidates for android miss them too (qnn-w8a16 on snapdragon-8-gen-3, qnn-w4a16 on snapdragon-8-elite, qnn-w8a16 on snapdragon-8-elite)") {
		t.Errorf("%+v", p.Warnings)
	}
}

func TestPickFormatOverride(t *testing.T) {
	p, err := PickTarget(PickRequest{Platform: "ios", Model: smol, Format: "gguf-q4_k_m"})
	if err != nil || p.Format != "gguf-q4_k_m" || p.Device != "apple-a18" ||
		!strings.Contains(p.Reasons[len(p.Reasons)-1], "the platform guide's choice for ios is coreml-int4") {
		t.Errorf("%+v, %v", p, err)
	}
	var fe *FormatError
	if _, err := PickTarget(PickRequest{Platform: "browser", Model: smol, Format: "gguf-q4_k_m"}); !errors.As(err, &fe) ||
		!strings.Contains(err.Error(), "use mlc-q4f32_1") {
		t.Errorf("GGUF in a browser: %v", err)
	}
	if _, err := PickTarget(PickRequest{Platform: "ios", Model: smol, Format: "gguf-q4km"}); !errors.As(err, &fe) ||
		!strings.Contains(err.Error(), `did you mean "gguf-q4_k_m"`) {
		t.Errorf("misspelt format: %v", err)
	}
	var up *UnknownPlatformError
	if _, err := PickTarget(PickRequest{Platform: "watch", Model: smol}); !errors.As(err, &up) || !strings.Contains(err.Error(), "ios, android") {
		t.Errorf("unknown platform: %v", err)
	}
}

// A model whose shape is unknown still gets the platform's choice, with
// the reason the numbers are missing.
func TestPickUnknownShape(t *testing.T) {
	m := ResolveModel("https://example.com/model.tar.gz", "")
	p, err := PickTarget(PickRequest{Platform: "laptop", Model: m, MinTokensPerS: 10})
	if err != nil || p.Device != "x86-laptop" || p.Prediction.Memory != nil || len(p.Prediction.Notes) != 1 {
		t.Errorf("%+v, %v", p, err)
	}
}

// The default context yields to a model trained for less, so the recipe
// init writes validates; an explicit context beyond it is refused, and so
// is a local model that is not there.
func TestPickContextAndMissingModel(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "llama", "hidden_size": 576,
		"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "intermediate_size": 1536,
		"vocab_size": 49152, "max_position_embeddings": 2048}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m := ResolveModel(dir, "")
	p, err := PickTarget(PickRequest{Platform: "laptop", Model: m})
	if err != nil || p.Context != 2048 || !strings.Contains(strings.Join(p.Reasons, "\n"), "context 2048, the model's max_position_embeddings") {
		t.Errorf("default context: %d, %q, %v", p.Context, p.Reasons, err)
	}
	if p, err := PickTarget(PickRequest{Platform: "laptop", Model: m, Context: 1024}); err != nil || p.Context != 1024 {
		t.Errorf("context 1024: %d, %v", p.Context, err)
	}
	var ctxErr *ContextError
	if _, err := PickTarget(PickRequest{Platform: "laptop", Model: m, Context: 4096}); !errors.As(err, &ctxErr) || ctxErr.Max != 2048 {
		t.Errorf("context 4096 on a 2048 model: %v", err)
	}
	var modelErr *ModelError
	for _, src := range []string{filepath.Join(dir, "nowhere"), filepath.Join(dir, "nowhere.gguf")} {
		m := ResolveModel(src, "")
		if _, err := PickTarget(PickRequest{Platform: "laptop", Model: m}); !m.Missing || !errors.As(err, &modelErr) || !strings.Contains(err.Error(), "no such file or folder") {
			t.Errorf("%s: missing %v, %v", src, m.Missing, err)
		}
	}
}
