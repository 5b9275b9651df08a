package publish

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/steps"
)

func TestJudgeAgreement(t *testing.T) {
	for _, tc := range []struct {
		agreement, min float64
		want           string
	}{
		{1, 0.99, manifest.VerdictExcellent},
		{0.99, 0.99, manifest.VerdictOK},
		{71.0 / 72, 0.99, manifest.VerdictFail}, // 98.6%: one image of 72 changed is under 99%
		{0.5833, 0.5, manifest.VerdictOK},
	} {
		if got := JudgeAgreement(tc.agreement, tc.min); got != tc.want {
			t.Errorf("agreement %g, min %g: %s, want %s", tc.agreement, tc.min, got, tc.want)
		}
	}
}

// judge: an agreement-gated target is judged on agreement only (an
// unlabelled set has no accuracy), fails under min with a message that
// says agreement; an accuracy gate on an unlabelled set fails and names
// the fix.
func TestJudgeAgreementGate(t *testing.T) {
	agree, ref := 0.5, 0.0
	check := &steps.Output{StepID: "vision-eval:int8", Result: &steps.Result{Accuracy: &steps.Accuracy{
		Images: 72, Agreement: &agree, Reference: &ref, Unlabelled: true}}}
	p := &Publisher{}
	min, drop := 0.99, 0.01
	tg := &Params{Target: "cpu-int8", MinAgreement: &min}
	_, acc, agr, err := p.judge(&Request{Params: tg, Checks: []*steps.Output{check}})
	if err == nil || acc != nil || agr == nil || agr.Verdict != manifest.VerdictFail {
		t.Fatalf("judge: acc %+v agr %+v err %v", acc, agr, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "top-1 agreement with the fp32 PyTorch model 50.00% (72 images) is under min 99.00%") ||
		!strings.Contains(msg, "not accuracy") {
		t.Errorf("message: %s", msg)
	}
	min = 0.5
	if _, _, agr, err := p.judge(&Request{Params: tg, Checks: []*steps.Output{check}}); err != nil || agr.Verdict != manifest.VerdictOK {
		t.Errorf("min 0.5: %+v %v", agr, err)
	}
	tg.MinAgreement, tg.MaxAccuracyDrop = nil, &drop
	_, _, _, err = p.judge(&Request{Params: tg, Checks: []*steps.Output{check}})
	if err == nil || !strings.Contains(err.Error(), "has no labels") || !strings.Contains(err.Error(), "quality: {agreement: {min: 0.99}}") {
		t.Errorf("accuracy on an unlabelled set: %v", err)
	}
}
