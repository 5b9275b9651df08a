package cli

import (
	"path/filepath"
	"testing"
)

// Every shipped recipe parses, validates, passes the memory pre-flight and
// expands into a plan: they are the examples users copy.
func TestShippedRecipesPlan(t *testing.T) {
	recipes, err := filepath.Glob("../../recipes/*.yaml")
	if err != nil || len(recipes) == 0 {
		t.Fatalf("no recipes found: %v", err)
	}
	for _, r := range recipes {
		p, err := loadPlan(r)
		if err != nil {
			t.Errorf("%s: %v", r, err)
			continue
		}
		if len(p.Steps) == 0 || len(p.Recipe.Targets) == 0 {
			t.Errorf("%s: empty plan", r)
		}
	}
}
