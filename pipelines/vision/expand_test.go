package vision_test

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	_ "github.com/edgepipe/edgepipe/pipelines" // every family
	"github.com/edgepipe/edgepipe/pipelines/vision"
)

func load(t *testing.T, src string) (*plan.Plan, error) {
	t.Helper()
	r, err := recipe.LoadBytes("r.yaml", []byte(src), plan.Catalog{}, nil)
	if err != nil {
		return nil, err
	}
	return plan.Expand(r)
}

const visionRecipe = `edgepipe: 1
name: digits
task: image-classification
model: {source: builtin:mobilenetv3-small-digits}
targets:
  fp32: {device: x86-laptop, format: onnx-fp32}
  int8: {device: x86-laptop, format: onnx-int8}
  int8-entropy:
    device: x86-laptop
    format: onnx-int8
    with: {calibration_method: entropy, keep_float: /classifier/}
    quality: {accuracy: {max_drop: 0.02}}
`

// Targets share the source, the reference score and the export; each
// quantized model gets its own check, which needs the reference.
func TestExpandSharesExportAndReference(t *testing.T) {
	p, err := load(t, visionRecipe)
	if err != nil {
		t.Fatal(err)
	}
	needs := map[string]string{}
	for _, s := range p.Steps {
		needs[s.ID] = strings.Join(s.Needs, ",")
	}
	want := map[string]string{
		"source":               "",
		vision.ReferenceStepID: "source",
		"vision-export:fp32":   "source",
		"vision-eval:fp32":     "vision-export:fp32," + vision.ReferenceStepID,
		"vision-quantize:int8": "vision-export:fp32",
		"vision-eval:int8":     "vision-quantize:int8," + vision.ReferenceStepID,
		"publish:int8":         "vision-quantize:int8,vision-eval:int8",
		"publish:int8-entropy": "",
		"vision-eval:int8+calibration_method=entropy+keep_float=": "",
	}
	for id, n := range want {
		found := false
		for got, gn := range needs {
			if got == id || (strings.HasSuffix(id, "=") && strings.HasPrefix(got, id)) {
				found = true
				if n != "" && gn != n {
					t.Errorf("%s needs %q, want %q", got, gn, n)
				}
			}
		}
		if !found {
			t.Errorf("no step %s in %v", id, needs)
		}
	}
	if len(p.Steps) != 11 {
		t.Errorf("%d steps, want 11 (shared source, reference and export): %v", len(p.Steps), needs)
	}
	q, _ := p.Step("vision-quantize:int8")
	qp := q.Params.(*vision.QuantizeParams)
	if qp.Method != "minmax" || !qp.PerChannel || !qp.KeepStem || qp.KeepFloat != "" || qp.Samples != 0 {
		t.Errorf("int8 defaults %+v", qp)
	}
	if q.Data["calibration"] != recipe.DefaultVisionCalibration {
		t.Errorf("calibration data %v", q.Data)
	}
	pub, _ := p.Step("publish:int8-entropy")
	if d := pub.Params.(*plan.PublishParams).MaxAccuracyDrop; d == nil || *d != 0.02 {
		t.Errorf("publish max_accuracy_drop %v, want the target's 0.02", d)
	}
	pub, _ = p.Step("publish:fp32")
	if d := pub.Params.(*plan.PublishParams).MaxAccuracyDrop; d == nil || *d != recipe.DefaultMaxAccuracyDrop {
		t.Errorf("publish max_accuracy_drop %v, want the default", d)
	}
	if pp := pub.Params.(*plan.PublishParams); pp.KVDtype != "" {
		t.Errorf("an image classifier has no KV cache, got kv_dtype %q", pp.KVDtype)
	}
}

// A text-generation recipe's onnx-fp32 is the LLM family's, and its keys
// do not move; onnx-int8 there is an error that names the task.
func TestTextRecipesUnchanged(t *testing.T) {
	p, err := load(t, `edgepipe: 1
name: laptop
model: {source: builtin:smollm2-135m}
targets:
  fp32: {device: x86-laptop, format: onnx-fp32}
`)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Step("onnx-export:fp32"); !ok {
		t.Errorf("a text recipe's onnx-fp32 is not the onnx family's: %v", p.Steps)
	}
	if _, ok := p.Step(vision.ReferenceStepID); ok {
		t.Error("a text recipe got vision steps")
	}
	pub, _ := p.Step("publish:fp32")
	if pub.Params.(*plan.PublishParams).MaxAccuracyDrop != nil {
		t.Error("a text recipe's publish params changed")
	}
	_, err = load(t, `edgepipe: 1
name: laptop
model: {source: builtin:smollm2-135m}
targets:
  int8: {device: x86-laptop, format: onnx-int8}
`)
	if err == nil || !strings.Contains(err.Error(), "r.yaml:5:") || !strings.Contains(err.Error(), "add task: image-classification") {
		t.Errorf("onnx-int8 in a text recipe: %v", err)
	}
}

func TestKeepFloatMustBeARegexp(t *testing.T) {
	_, err := load(t, strings.Replace(visionRecipe, "keep_float: /classifier/", "keep_float: '(unclosed'", 1))
	if err == nil || !strings.Contains(err.Error(), "keep_float is not a regular expression") {
		t.Errorf("got %v", err)
	}
}

// bench: at the top of the recipe gives every target a vision-bench step
// after its model, in the runtime that gated it; targets with the same
// model and settings share one; a target's own keys make another.
func TestExpandBench(t *testing.T) {
	p, err := load(t, `edgepipe: 1
name: digits
task: image-classification
model: {source: builtin:mobilenetv3-small-digits}
bench: {}
targets:
  fp32: {device: x86-laptop, format: onnx-fp32}
  fp32-again: {device: generic-x86-laptop, format: onnx-fp32}
  int8: {device: x86-laptop, format: onnx-int8, bench: {batch: 8, runs: 20}}
  phone: {device: snapdragon-8-gen-3, format: tflite-int8}
`)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*plan.Step{}
	for _, s := range p.Steps {
		byID[s.ID] = s
	}
	for id, want := range map[string]vision.BenchParams{
		"vision-bench:vision-export:fp32":                   {Runtime: "onnxruntime", Warmup: 10, Runs: 50, Batch: 1},
		"vision-bench:vision-quantize:int8+batch=8+runs=20": {Runtime: "onnxruntime", Warmup: 10, Runs: 20, Batch: 8},
		"vision-bench:litert-convert:tflite-int8":           {Runtime: "litert", Warmup: 10, Runs: 50, Batch: 1},
	} {
		s := byID[id]
		if s == nil {
			t.Errorf("no step %s", id)
			continue
		}
		if got := *s.Params.(*vision.BenchParams); got != want || s.Kind != vision.KindBench || len(s.Needs) != 1 {
			t.Errorf("%s: %+v needs %v, want %+v", id, got, s.Needs, want)
		}
	}
	if s := byID["vision-bench:vision-export:fp32"]; strings.Join(s.Targets, ",") != "fp32,fp32-again" {
		t.Errorf("fp32's bench serves %v, want both fp32 targets", s.Targets)
	}
	if n := strings.Join(byID["publish:int8"].Needs, ","); !strings.Contains(n, "vision-bench:vision-quantize:int8+batch=8+runs=20") {
		t.Errorf("publish:int8 needs %s: the manifest records the bench", n)
	}
	// No bench: no step.
	p, err = load(t, visionRecipe)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Steps {
		if s.Kind == vision.KindBench || s.Kind == "bench" {
			t.Errorf("a recipe without bench: has the step %s", s.ID)
		}
	}
}
