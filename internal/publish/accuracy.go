package publish

import (
	"fmt"
	"math"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/steps"
)

// AccuracyResult is an image classifier's quality gate: top-1 accuracy of
// the converted model against the reference (the fp32 PyTorch model) on
// the same labelled images.
type AccuracyResult struct {
	Target    string  `json:"target"`
	Reference float64 `json:"reference"`
	Converted float64 `json:"converted"`
	Drop      float64 `json:"drop"`
	MaxDrop   float64 `json:"max_drop"`
	Verdict   string  `json:"verdict"`
	Step      string  `json:"step"`
	measured  *steps.Accuracy
	format    string // the target's, for the fixes a failure names
}

// JudgeAccuracy applies the brief's vision rule: a drop (reference minus
// converted top-1, as a fraction) over maxDrop fails; a model at least as
// accurate as the reference is excellent.
func JudgeAccuracy(reference, converted, maxDrop float64) (drop float64, verdict string) {
	drop = reference - converted
	switch {
	case math.IsNaN(converted) || math.IsNaN(reference) || drop > maxDrop+1e-12:
		return drop, manifest.VerdictFail
	case drop <= 0:
		return drop, manifest.VerdictExcellent
	}
	return drop, manifest.VerdictOK
}

// judgeAccuracy judges one check step's accuracy, or returns nil when it
// is not a comparison with the reference.
func judgeAccuracy(t *Params, step string, a *steps.Accuracy) *AccuracyResult {
	if a == nil || a.Reference == nil || a.Unlabelled || !accuracyGated(t) {
		return nil
	}
	maxDrop := *t.MaxAccuracyDrop
	d, v := JudgeAccuracy(*a.Reference, a.Top1, maxDrop)
	return &AccuracyResult{Target: t.Target, Reference: *a.Reference, Converted: a.Top1, Drop: d, MaxDrop: maxDrop,
		Verdict: v, Step: step, measured: a, format: t.Format}
}

// accuracyGated: the accuracy gate applies when the plan set it (the
// default of an image classifier that gates on no agreement instead).
func accuracyGated(t *Params) bool { return t.MaxAccuracyDrop != nil }

func (g *AccuracyResult) failure() string {
	return fmt.Sprintf("target %s failed its quality gate: top-1 accuracy %.2f%% against the reference's %.2f%% is a drop of %.2f points, over max_drop %.2f points (%g); nothing was published. %s, or raise quality.accuracy.max_drop for this target if the loss is acceptable",
		g.Target, 100*g.Converted, 100*g.Reference, 100*g.Drop, 100*g.MaxDrop, g.MaxDrop, int8Fixes(g.format))
}

// manifestAccuracy is the gate as the manifest records it.
func (g *AccuracyResult) manifestAccuracy() *manifest.Accuracy {
	m := &manifest.Accuracy{Reference: g.Reference, Converted: g.Converted, Drop: g.Drop, MaxDrop: g.MaxDrop, Verdict: g.Verdict}
	if a := g.measured; a != nil {
		m.Images, m.Agreement, m.Backend, m.ReferenceBackend = a.Images, a.Agreement, a.Backend, a.ReferenceBackend
	}
	return m
}

// int8Fixes names what a user can change when a calibrated INT8 target
// loses too much: the options its format takes; every format takes
// another calibration set.
func int8Fixes(format string) string {
	switch format {
	case "onnx-int8":
		return "Calibrate on more or more representative images (data.calibration), try another with: {calibration_method: ...}, " +
			"keep sensitive layers in float (with: {keep_float: ...})"
	case "coreml-int8":
		return "Calibrate on more or more representative images (data.calibration), try the other with: {keep_stem_float: ...} " +
			"or with: {activations: ...}, try another format for this device (edgepipe pick --task vision)"
	}
	return "Calibrate on more or more representative images (data.calibration), try another format for this device (edgepipe pick --task vision)"
}
