package pipelines_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

// The good recipes must also pass the real device catalog, and the
// documented WebGPU + GGUF mistake must name the MLC fix.
func TestValidateRealCatalog(t *testing.T) {
	files, _ := filepath.Glob("../internal/recipe/testdata/recipes/good/*.yaml")
	for _, file := range files {
		if _, err := recipe.Load(file, plan.Catalog{}, nil); err != nil {
			t.Errorf("%s:\n%v", file, err)
		}
	}
	_, err := recipe.Load("../internal/recipe/testdata/recipes/bad/device-cannot-run.yaml", plan.Catalog{}, nil)
	if err == nil || !strings.Contains(err.Error(), "hint: use mlc-q4f16_1") {
		t.Errorf("want the mlc-q4f16_1 fix, got:\n%v", err)
	}
}

// The vision picker names the formats this build converts: each must be
// one an image-classification family registers, or pick would point
// users at a pipeline that does not exist.
func TestPickerVisionFormatsHavePipelines(t *testing.T) {
	have := map[string]bool{}
	for _, f := range plan.Families() {
		if f.Task == recipe.TaskImageClassification {
			for _, name := range f.TaskFormats {
				have[name] = true
			}
		}
	}
	for _, name := range edge.BuiltVisionFormats() {
		if !have[name] {
			t.Errorf("edge's picker says this build converts %s for vision, but no image-classification family has it", name)
		}
	}
}

// The support matrix the families declare for the built-in tiny models'
// architectures (and Gemma 3's multimodal checkpoint): each refusal is a
// limit read in the pinned tool or the family's helper
// (docs/architectures.md); everything else is taken.
func TestArchitectureRefusals(t *testing.T) {
	archs := []string{"llama", "qwen2", "qwen3", "gemma3_text", "gemma3", "phi3", "mistral", "qwen3_moe", "mixtral"}
	refused := map[string][]string{
		"mlc-q4f16_1":   {"qwen2", "qwen3", "gemma3_text", "gemma3", "phi3", "mistral", "qwen3_moe", "mixtral"},
		"mlc-q4f32_1":   {"qwen2", "qwen3", "gemma3_text", "gemma3", "phi3", "mistral", "qwen3_moe", "mixtral"},
		"onnx-fp32":     {"mixtral"},
		"onnx-int4":     {"mixtral"},
		"qnn-w8a16":     {"mixtral"},
		"qnn-w4a16":     {"mixtral"},
		"openvino-int4": {"gemma3_text", "gemma3"},
		"openvino-int8": {"gemma3_text", "gemma3"},
		"coreml-int4":   {"gemma3", "qwen3_moe", "mixtral"},
		"awq-w4a16":     {"qwen3_moe", "mixtral"},
		"gptq-w4a16":    {"qwen3_moe"},
		"gguf-q4_k_m":   nil,
		"gguf-q8_0":     nil,
	}
	for format, want := range refused {
		var got []string
		for _, a := range archs {
			if why := plan.ArchitectureRefusal(recipe.TaskTextGeneration, format, a); why != "" {
				got = append(got, a)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s refuses %v, want %v", format, got, want)
		}
	}
	if why := plan.ArchitectureRefusal(recipe.TaskTextGeneration, "onnx-int4", "my_arch"); !strings.Contains(why, "no text-generation export for model_type my_arch") {
		t.Errorf("an architecture optimum does not register: %q", why)
	}
}
