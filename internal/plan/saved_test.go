package plan_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/edgepipe/edgepipe/internal/plan"
)

const savedRecipe = `edgepipe: 1
name: m
model: {source: "https://user:hunter2@models.example.com/m.tar"}
targets:
  t: {device: x86-laptop, format: gguf-q8_0}
`

// writeSaved saves p as `plan --json` prints it, into dir/plan.json.
func writeSaved(t *testing.T, p *Plan, dir, recipePath string, status map[string]string) string {
	t.Helper()
	sv, err := Save(p, recipePath, status)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(sv, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A saved plan reads back as the plan it was saved from: every step with
// its needs, target, cache status and params (credentials removed), and
// the recipe path relative to the plan's folder.
func TestSavedPlanRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := load(t, dir, savedRecipe)
	path := writeSaved(t, p, dir, "r.yaml", map[string]string{"source": "hit", "gguf-convert:f16": "stale"})

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "hunter2") {
		t.Errorf("the saved plan holds the source's password:\n%s", raw)
	}
	sv, err := ReadSaved(path)
	if err != nil {
		t.Fatal(err)
	}
	if sv.Recipe != filepath.Join(dir, "r.yaml") {
		t.Errorf("recipe %q, want it beside the plan", sv.Recipe)
	}
	if len(sv.Steps) != len(p.Steps) {
		t.Fatalf("%d steps saved, plan has %d", len(sv.Steps), len(p.Steps))
	}
	for i, s := range p.Steps {
		got := sv.Steps[i]
		if got.ID != s.ID || got.Kind != s.Kind || got.Target != s.Target || strings.Join(got.Needs, ",") != strings.Join(s.Needs, ",") {
			t.Errorf("step %d saved as %+v, want %s", i, got, s.ID)
		}
		want := "miss"
		if s.ID == "source" {
			want = "hit"
		}
		if got.Cache != want {
			t.Errorf("%s: cache %q, want %q", s.ID, got.Cache, want)
		}
	}
	if !strings.Contains(string(raw), `"needs": []`) {
		t.Error("a step without needs is saved with needs null, not []")
	}
	if err := sv.Check(p); err != nil {
		t.Errorf("the plan it was saved from: %v", err)
	}

	// An absolute recipe path stays as written.
	abs := filepath.Join(t.TempDir(), "elsewhere.yaml")
	sv2, err := ReadSaved(writeSaved(t, p, t.TempDir(), abs, nil))
	if err != nil || sv2.Recipe != abs {
		t.Errorf("absolute recipe path read back as %q, %v", sv2.Recipe, err)
	}
}

// A saved plan refuses to describe a recipe that changed since: other
// params, other needs, other steps.
func TestSavedPlanCheckRefusesAChangedRecipe(t *testing.T) {
	dir := t.TempDir()
	sv, err := ReadSaved(writeSaved(t, load(t, dir, savedRecipe), dir, "r.yaml", nil))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ recipe, want string }{
		"params": {strings.Replace(savedRecipe, "format: gguf-q8_0}", "format: gguf-q8_0, quality: {perplexity: {max_delta: 1}}}", 1),
			"step publish:t's parameters are"},
		"needs": {savedRecipe + "steps:\n  lint: {uses: run, with: {argv: [\"true\"]}}\n  publish:t: {needs: [lint]}\n",
			"steps now"},
		"steps": {savedRecipe + "  t2: {device: x86-laptop, format: gguf-q4_0}\n", "steps now"},
		"order": {strings.Replace(savedRecipe, "gguf-q8_0", "gguf-q4_0", 1), "step 3 is gguf-quantize:q4_0 now, gguf-quantize:q8_0 then"},
	} {
		err := sv.Check(load(t, "", tc.recipe))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "save the plan again") {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	// Needs changed on the same steps.
	withLint := load(t, "", savedRecipe+"steps:\n  lint: {uses: run, with: {argv: [\"true\"]}}\n")
	sv3, err := ReadSaved(writeSaved(t, withLint, t.TempDir(), "r.yaml", nil))
	if err != nil {
		t.Fatal(err)
	}
	moreNeeds := load(t, "", savedRecipe+"steps:\n  lint: {uses: run, with: {argv: [\"true\"]}}\n  publish:t: {needs: [lint]}\n")
	if err := sv3.Check(moreNeeds); err == nil || !strings.Contains(err.Error(), "step publish:t needs") {
		t.Errorf("needs changed: %v", err)
	}
}

func TestReadSavedRefusesOtherFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.json")
	if err := os.WriteFile(path, []byte("steps: [not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSaved(path); err == nil || !strings.Contains(err.Error(), path+" is not a plan written by `edgepipe plan --json`") {
		t.Errorf("err = %v", err)
	}
	if _, err := ReadSaved(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "read the plan") {
		t.Errorf("missing file: %v", err)
	}
}
