package publish

import (
	"fmt"
	"math"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/steps"
)

// AgreementResult is an image classifier's agreement gate: the share of
// the evaluation images on which the converted model's top-1 class is the
// fp32 PyTorch model's. It needs no labels, and it is not accuracy: a
// converted model wrong exactly where the reference is wrong scores 1.
type AgreementResult struct {
	Target    string  `json:"target"`
	Agreement float64 `json:"agreement"`
	Min       float64 `json:"min"`
	Verdict   string  `json:"verdict"`
	Step      string  `json:"step"`
	measured  *steps.Accuracy
	format    string
}

// JudgeAgreement: under min fails; every image agreeing is excellent.
func JudgeAgreement(agreement, min float64) string {
	switch {
	case math.IsNaN(agreement) || agreement < min-1e-12:
		return manifest.VerdictFail
	case agreement >= 1:
		return manifest.VerdictExcellent
	}
	return manifest.VerdictOK
}

// judgeAgreement judges one check step's agreement with the reference, or
// returns nil when the target has no agreement gate or the step is not a
// comparison with the reference.
func judgeAgreement(t *Params, step string, a *steps.Accuracy) *AgreementResult {
	if t.MinAgreement == nil || a == nil || a.Agreement == nil {
		return nil
	}
	min := *t.MinAgreement
	return &AgreementResult{Target: t.Target, Agreement: *a.Agreement, Min: min,
		Verdict: JudgeAgreement(*a.Agreement, min), Step: step, measured: a, format: t.Format}
}

func (g *AgreementResult) failure() string {
	n := 0
	if g.measured != nil {
		n = g.measured.Images
	}
	return fmt.Sprintf("target %s failed its quality gate: top-1 agreement with the fp32 PyTorch model %.2f%% (%d images) is under min %.2f%% (%g); nothing was published. Agreement is not accuracy: it counts the images whose predicted class changed. %s, or lower quality.agreement.min for this target if the change is acceptable",
		g.Target, 100*g.Agreement, n, 100*g.Min, g.Min, int8Fixes(g.format))
}

// manifestAgreement is the gate as the manifest records it.
func (g *AgreementResult) manifestAgreement() *manifest.Agreement {
	m := &manifest.Agreement{Agreement: g.Agreement, Min: g.Min, Verdict: g.Verdict}
	if a := g.measured; a != nil {
		m.Images, m.Labelled, m.Backend, m.ReferenceBackend = a.Images, !a.Unlabelled, a.Backend, a.ReferenceBackend
	}
	return m
}

// unlabelledAccuracy is the failure of an accuracy gate on a set without
// labels (a file the recipe names; built-in ones are refused at parse).
func unlabelledAccuracy(t *Params, step string) *GateError {
	return &GateError{Target: t.Target, Step: step, Check: &steps.Check{Name: "accuracy gate", Passed: false,
		Detail: "data.eval has no labels (every label -1), so top-1 accuracy cannot be measured; gate on agreement with the fp32 model instead: quality: {agreement: {min: 0.99}} and no quality.accuracy, or evaluate on a labelled set"}}
}
