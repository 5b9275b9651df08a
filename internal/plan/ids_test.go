package plan_test

import (
	"path/filepath"
	"strings"
	"testing"

	. "github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/steps"
)

// Every step of every shipped recipe has an id and a kind CheckID and
// CheckKind accept: the checks describe the ids plans really make.
func TestCheckIDAcceptsEveryPlannedStep(t *testing.T) {
	names, _ := filepath.Glob("../../recipes/*.yaml")
	if len(names) < 5 {
		t.Fatalf("found %d recipes; the test looks in the wrong place", len(names))
	}
	seen := 0
	for _, name := range names {
		r, err := recipe.Load(name, Catalog{}, steps.Names())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p, err := Expand(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range p.Steps {
			seen++
			if err := steps.CheckID(s.ID); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if err := steps.CheckKind(s.Kind); err != nil {
				t.Errorf("%s: step %s: %v", name, s.ID, err)
			}
		}
	}
	for _, k := range steps.Names() {
		if err := steps.CheckKind(k); err != nil {
			t.Error(err)
		}
	}
	// Options a target sets land in ids; a device name has spaces.
	for _, id := range []string{"qnn-compile:ai-hub:snapdragon-8-gen-3:int8+hub_device=Samsung Galaxy S24 (Family)", "source", "smoke-test"} {
		if err := steps.CheckID(id); err != nil {
			t.Error(err)
		}
	}
	t.Logf("%d steps of %d recipes", seen, len(names))
}

func TestCheckIDRefusesWhatNoPlanMakes(t *testing.T) {
	for _, id := range []string{"", "evil step", "Source", ":x", "../x", "a:b\x1b[31m", "a:\n", "a:é", "x:" + strings.Repeat("a", 600)} {
		err := steps.CheckID(id)
		if err == nil {
			t.Errorf("steps.CheckID(%q) accepted it", id)
			continue
		}
		if strings.ContainsAny(err.Error(), "\x1b\n") {
			t.Errorf("steps.CheckID(%q) echoes control characters: %q", id, err)
		}
	}
	for _, k := range []string{"", "Fetch", "a b", "x:y"} {
		if steps.CheckKind(k) == nil {
			t.Errorf("steps.CheckKind(%q) accepted it", k)
		}
	}
}
