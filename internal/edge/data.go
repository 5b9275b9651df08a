package edge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/npz"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

// DataUse says which of the recipe's data sets the plan's steps read.
type DataUse struct{ Calibration, Eval bool }

// imageSetHint is the contract every vision tool reads a set by
// (pipelines/pylib/vision_data.py).
const imageSetHint = "an image set is an .npz of two arrays: images, uint8 (N, H, W) or (N, H, W, 3) with N > 0, and labels, integer class indices (N,) (or every label -1 for an unlabelled set): numpy.savez(path, images=images, labels=labels)"

// CheckData checks the data sets the plan reads before anything runs, so
// a set every tool would refuse is an error at the recipe's data: key
// (exit 2), not a failed step: a data file that is a FIFO or a device;
// an image-classification recipe's set files against the tools' contract
// (internal/npz: dtype, shape, labels within the model's classes where
// they are known, a cap on the expanded size, no pickled objects); and
// calibration data that overlaps the evaluation data (checkOverlap),
// unless the recipe allows it. A file that is not there is left to the
// run, which says where it looked.
func CheckData(r *recipe.Recipe, use DataUse) recipe.Diagnostics {
	var diags recipe.Diagnostics
	add := func(msg, hint string) {
		diags = append(diags, recipe.Diagnostic{Pos: r.Data.Pos, Msg: msg, Hint: hint})
	}
	classes := 0
	if r.Traits().Images {
		classes = visionClasses(r)
	}
	checked := map[string]bool{}
	for _, d := range []struct {
		key, ref string
		used     bool
	}{{"data.calibration", r.Data.Calibration, use.Calibration}, {"data.eval", r.Data.Eval, use.Eval}} {
		if !d.used || d.ref == "" || strings.HasPrefix(d.ref, "builtin:") {
			continue
		}
		path := dataPath(r, d.ref)
		if checked[path] {
			continue
		}
		checked[path] = true
		if err := checkDataFile(path); err != nil {
			add(fmt.Sprintf("%s %s: %v", d.key, d.ref, err), "a data file is a regular file: put the file itself there")
			continue
		}
		if r.Traits().Images {
			if _, err := npz.CheckImageSet(path, classes); err != nil && !errors.Is(err, fs.ErrNotExist) {
				add(fmt.Sprintf("%s %s: %v", d.key, d.ref, err), imageSetHint)
			}
		}
	}
	if len(diags) == 0 && use.Calibration && use.Eval {
		if d := checkOverlap(r); d != nil {
			diags = append(diags, *d)
		}
	}
	return diags
}

// checkDataFile refuses a data file that is not a regular file (opening
// it without waiting on a FIFO); one that is not there passes.
func checkDataFile(path string) error {
	f, _, err := boundedfile.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// dataPath is a data file's path: relative to the recipe's folder.
func dataPath(r *recipe.Recipe, ref string) string {
	if filepath.IsAbs(ref) {
		return ref
	}
	return filepath.Join(r.Dir(), ref)
}

// visionBuiltinClasses are the built-in classifiers' class counts.
var visionBuiltinClasses = map[string]int{
	"builtin:mobilenetv3-small-digits": 10,
	"builtin:efficientnet-lite0":       1000,
}

// visionClasses is the classifier's class count: a built-in's, or a local
// folder's config.json num_classes; 0 when it cannot be known here.
func visionClasses(r *recipe.Recipe) int {
	src := r.Model.Source
	if n, ok := visionBuiltinClasses[src]; ok {
		return n
	}
	if strings.Contains(src, ":") && !strings.HasPrefix(src, "./") && !filepath.IsAbs(src) {
		return 0
	}
	b, err := boundedfile.Read(filepath.Join(dataPath(r, src), "config.json"), boundedfile.ModelJSONLimit)
	if err != nil {
		return 0
	}
	var cfg struct {
		NumClasses int `json:"num_classes"`
	}
	if json.Unmarshal(b, &cfg) != nil || cfg.NumClasses <= 0 {
		return 0
	}
	return cfg.NumClasses
}
