package edge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/recipe"
)

// TestCheckDataImageSets: a vision recipe's set files are checked against
// the model's classes (a built-in's, or config.json's num_classes), only
// when a step reads them; built-in sets and missing files are not.
func TestCheckDataImageSets(t *testing.T) {
	dir := t.TempDir()
	digits, err := os.ReadFile("../../data/digits-test.npz")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "digits.npz"), string(digits))
	writeFile(t, filepath.Join(dir, "model", "config.json"), `{"num_classes": 5}`)
	r := &recipe.Recipe{Path: filepath.Join(dir, "r.yaml"), Task: recipe.TaskImageClassification,
		Model: recipe.Model{Source: "./model"}, Data: recipe.Data{Calibration: "digits.npz", Eval: "builtin:digits-calibration", Pos: recipe.Pos{Line: 6, Col: 1}}}
	diags := CheckData(r, DataUse{Calibration: true, Eval: true})
	if len(diags) != 1 || diags[0].Pos.Line != 6 || !strings.Contains(diags[0].Msg, "data.calibration digits.npz: ") || !strings.Contains(diags[0].Msg, "but the model has 5 classes") {
		t.Errorf("5 classes: %v", diags)
	}
	if d := CheckData(r, DataUse{Eval: true}); len(d) > 0 {
		t.Errorf("a calibration set no step reads was checked: %v", d)
	}
	r.Model.Source = "builtin:mobilenetv3-small-digits"
	if d := CheckData(r, DataUse{Calibration: true, Eval: true}); len(d) > 0 {
		t.Errorf("digits against the 10-class built-in: %v", d)
	}
	r.Data.Calibration = "missing.npz"
	if d := CheckData(r, DataUse{Calibration: true, Eval: true}); len(d) > 0 {
		t.Errorf("a missing file is the run's to report: %v", d)
	}
}
