package pipelines_test

import (
	"path/filepath"
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
