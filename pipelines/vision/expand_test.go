package vision_test

import (
	"github.com/edgepipe/edgepipe/internal/publish"
	"reflect"
	"sort"
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
	if qp.Method != "minmax" || !qp.PerChannel || !qp.KeepStem || qp.KeepFloat != "" || qp.Samples != 0 || !qp.ReduceRange {
		t.Errorf("int8 defaults %+v", qp)
	}
	if q.Data["calibration"] != recipe.DefaultVisionCalibration {
		t.Errorf("calibration data %v", q.Data)
	}
	pub, _ := p.Step("publish:int8-entropy")
	if d := pub.Params.(*publish.Params).MaxAccuracyDrop; d == nil || *d != 0.02 {
		t.Errorf("publish max_accuracy_drop %v, want the target's 0.02", d)
	}
	pub, _ = p.Step("publish:fp32")
	if d := pub.Params.(*publish.Params).MaxAccuracyDrop; d == nil || *d != recipe.DefaultMaxAccuracyDrop {
		t.Errorf("publish max_accuracy_drop %v, want the default", d)
	}
	if pp := pub.Params.(*publish.Params); pp.KVDtype != "" {
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
	if pub.Params.(*publish.Params).MaxAccuracyDrop != nil {
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

// reduce_range: false is onnx-int8's way back to 8-bit weights (a step
// of its own); tensorrt-int8 refuses the option, and its Q/DQ model keeps
// 8-bit weights.
func TestReduceRange(t *testing.T) {
	p, err := load(t, strings.Replace(visionRecipe, "keep_float: /classifier/", "reduce_range: false", 1))
	if err != nil {
		t.Fatal(err)
	}
	q, ok := p.Step("vision-quantize:int8+calibration_method=entropy+reduce_range=false")
	if !ok {
		t.Fatalf("no reduce_range=false quantize step in %v", p.Steps)
	}
	if q.Params.(*vision.QuantizeParams).ReduceRange {
		t.Errorf("reduce_range: false was not passed on")
	}
	trt := strings.Replace(visionRecipe, "format: onnx-int8\n", "format: tensorrt-int8\n", 1)
	if _, err := load(t, strings.Replace(trt, "keep_float: /classifier/", "reduce_range: true", 1)); err == nil ||
		!strings.Contains(err.Error(), "reduce_range does not apply to tensorrt-int8") {
		t.Errorf("tensorrt-int8 with reduce_range: %v", err)
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

// qnn-int8 shares the export and the reference; its quantized model is
// device-independent, its context binary and simulator check are per SoC,
// and the simulator step carries the catalog's SoC and the subset.
func TestExpandQNN(t *testing.T) {
	p, err := load(t, `edgepipe: 1
name: digits
task: image-classification
model: {source: builtin:mobilenetv3-small-digits}
targets:
  int8: {device: x86-laptop, format: onnx-int8}
  gen3: {device: snapdragon-8-gen-3, format: qnn-int8}
  elite:
    device: snapdragon-8-elite
    format: qnn-int8
    with: {eval_images: 50}
`)
	if err != nil {
		t.Fatal(err)
	}
	needs := map[string]string{}
	for _, s := range p.Steps {
		needs[s.ID] = strings.Join(s.Needs, ",")
	}
	want := map[string]string{
		"vision-qnn-quantize:int8":                                   "vision-export:fp32",
		"vision-qnn-compile:snapdragon-8-gen-3:int8":                 "vision-qnn-quantize:int8",
		"vision-qnn-compile:snapdragon-8-elite:int8":                 "vision-qnn-quantize:int8",
		"vision-eval:qnn-htp:snapdragon-8-gen-3:int8":                "vision-qnn-compile:snapdragon-8-gen-3:int8," + vision.ReferenceStepID,
		"vision-eval:qnn-htp:snapdragon-8-elite:int8+eval_images=50": "vision-qnn-compile:snapdragon-8-elite:int8," + vision.ReferenceStepID,
		"publish:gen3": "vision-qnn-compile:snapdragon-8-gen-3:int8,vision-eval:qnn-htp:snapdragon-8-gen-3:int8",
	}
	for id, n := range want {
		if got, ok := needs[id]; !ok || got != n {
			t.Errorf("%s needs %q (present %t), want %q", id, got, ok, n)
		}
	}
	if n := strings.Count(strings.Join(keys(needs), " "), "vision-export:"); n != 1 {
		t.Errorf("%d export steps, want 1 shared: %v", n, needs)
	}
	q, _ := p.Step("vision-qnn-quantize:int8")
	if qp := q.Params.(*vision.QNNQuantizeParams); !qp.PerChannel || qp.Samples != 0 || q.Data["calibration"] != recipe.DefaultVisionCalibration {
		t.Errorf("quantize defaults %+v, data %v", qp, q.Data)
	}
	c, _ := p.Step("vision-qnn-compile:snapdragon-8-elite:int8")
	if cp := c.Params.(*vision.QNNCompileParams); cp.SoCModel != 69 || cp.HTPArch != 79 {
		t.Errorf("8 Elite compile params %+v, want the catalog's soc_model 69, htp_arch 79", cp)
	}
	e, _ := p.Step("vision-eval:qnn-htp:snapdragon-8-elite:int8+eval_images=50")
	if ep := e.Params.(*vision.EvalParams); ep.Runtime != vision.RuntimeQNNHTP || ep.SoCModel != 69 || ep.HTPArch != 79 || ep.Images != 50 {
		t.Errorf("8 Elite eval params %+v", ep)
	}
	e, _ = p.Step("vision-eval:qnn-htp:snapdragon-8-gen-3:int8")
	if ep := e.Params.(*vision.EvalParams); ep.SoCModel != 57 || ep.HTPArch != 75 || ep.Images != 0 {
		t.Errorf("8 Gen 3 eval params %+v", ep)
	}
	// A laptop has no Hexagon: the catalog lists no QNN runtime for it.
	if _, err := load(t, strings.Replace(visionRecipe, "format: onnx-int8}", "format: qnn-int8}", 1)); err == nil ||
		!strings.Contains(err.Error(), "qnn-int8") {
		t.Errorf("qnn-int8 on x86-laptop: %v", err)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// stepsByID indexes a plan's steps.
func stepsByID(p *plan.Plan) map[string]*plan.Step {
	out := map[string]*plan.Step{}
	for _, s := range p.Steps {
		out[s.ID] = s
	}
	return out
}

// The other formats: tflite-int8 and coreml-int8 convert the PyTorch
// model itself (no export), openvino-int8 and tensorrt-int8 quantize the
// shared export; each check needs its model first, then the reference,
// and carries the runtime that scores it. The defaults reach the params.
func TestExpandOtherFormats(t *testing.T) {
	p, err := load(t, `edgepipe: 1
name: digits
task: image-classification
model: {source: builtin:mobilenetv3-small-digits}
targets:
  android: {device: snapdragon-8-gen-3, format: tflite-int8}
  iphone: {device: apple-a18, format: coreml-int8}
  iphone-sym:
    device: apple-a18
    format: coreml-int8
    with: {activations: symmetric, keep_stem_float: false}
  intel: {device: intel-lunar-lake, format: openvino-int8}
  jetson:
    device: jetson-orin-nano-super
    format: tensorrt-int8
    with: {calibration_method: percentile, opt_batch: 4}
`)
	if err != nil {
		t.Fatal(err)
	}
	byID := stepsByID(p)
	ref := vision.ReferenceStepID
	for id, want := range map[string]string{
		"litert-convert:tflite-int8": "source",
		"vision-eval:tflite-int8":    "litert-convert:tflite-int8," + ref + ",source",
		vision.CoreMLProofStepID:     "source",
		"coreml-vision-convert:int8": "source",
		"vision-eval:coreml-int8":    "coreml-vision-convert:int8," + ref + "," + vision.CoreMLProofStepID + ",source",
		"coreml-vision-convert:int8+activations=symmetric+keep_stem_float=false":                        "source",
		"nncf-quantize:openvino-int8":                                                                   "vision-export:fp32",
		"vision-eval:openvino-int8":                                                                     "nncf-quantize:openvino-int8," + ref,
		"vision-quantize:int8+symmetric+calibration_method=percentile":                                  "vision-export:fp32",
		"vision-eval:int8+symmetric+calibration_method=percentile+simulated":                            "vision-quantize:int8+symmetric+calibration_method=percentile," + ref,
		"trtexec-build:int8+symmetric+calibration_method=percentile+opt_batch=4/jetson-orin-nano-super": "vision-quantize:int8+symmetric+calibration_method=percentile",
	} {
		s := byID[id]
		if s == nil {
			t.Errorf("no step %s in %v", id, keysOf(byID))
			continue
		}
		if got := strings.Join(s.Needs, ","); got != want {
			t.Errorf("%s needs %q, want %q", id, got, want)
		}
	}
	if n := strings.Count(strings.Join(keysOf(byID), " "), "vision-export:"); n != 1 {
		t.Errorf("%d export steps, want one shared by openvino-int8 and tensorrt-int8", n)
	}
	for id, want := range map[string]any{
		"litert-convert:tflite-int8":  vision.LiteRTParams{PerChannel: true},
		vision.CoreMLProofStepID:      vision.CoreMLParams{Mode: "fp32"},
		"coreml-vision-convert:int8":  vision.CoreMLParams{Mode: "int8", PerChannel: true, KeepStem: true, Activations: "affine"},
		"nncf-quantize:openvino-int8": vision.NNCFParams{Preset: "mixed", OverflowFix: "enable", KeepStem: true},
		"vision-eval:tflite-int8":     vision.EvalParams{Runtime: vision.RuntimeLiteRT},
		"vision-eval:coreml-int8":     vision.EvalParams{Runtime: vision.RuntimeCoreMLMIL},
		"vision-eval:openvino-int8":   vision.EvalParams{Runtime: vision.RuntimeOpenVINO},
		"vision-eval:int8+symmetric+calibration_method=percentile+simulated": vision.EvalParams{Runtime: vision.RuntimeONNX, SimulateQDQ: true},
		"coreml-vision-convert:int8+activations=symmetric+keep_stem_float=false": vision.CoreMLParams{Mode: "int8", PerChannel: true,
			Activations: "symmetric"},
		"vision-quantize:int8+symmetric+calibration_method=percentile": vision.QuantizeParams{Method: "percentile", PerChannel: true,
			KeepStem: true, SymmetricActivations: true},
		"trtexec-build:int8+symmetric+calibration_method=percentile+opt_batch=4/jetson-orin-nano-super": vision.TrtexecParams{OptBatch: 4,
			MaxBatch: vision.DefaultMaxBatch, Device: "jetson-orin-nano-super"},
	} {
		s := byID[id]
		if s == nil {
			continue // reported above
		}
		if got := reflect.ValueOf(s.Params).Elem().Interface(); got != want {
			t.Errorf("%s params %+v, want %+v", id, got, want)
		}
	}
	// Converters calibrate, checks score: each on its own data role.
	for _, id := range []string{"litert-convert:tflite-int8", "coreml-vision-convert:int8", "nncf-quantize:openvino-int8"} {
		if s := byID[id]; s != nil && s.Data["calibration"] != recipe.DefaultVisionCalibration {
			t.Errorf("%s data %v: want the calibration set", id, s.Data)
		}
	}
	if s := byID[vision.CoreMLProofStepID]; s != nil && len(s.Data) != 0 {
		t.Errorf("the FP32 proof package reads data %v: it calibrates nothing", s.Data)
	}
	if pub := byID["publish:jetson"]; pub == nil || pub.Needs[0] != "trtexec-build:int8+symmetric+calibration_method=percentile+opt_batch=4/jetson-orin-nano-super" {
		t.Errorf("publish:jetson %+v: the engine is the artifact", pub)
	}
}

// Options each format refuses, at the recipe's line.
func TestExpandRefusesOptions(t *testing.T) {
	for name, tc := range map[string]struct{ target, want string }{
		"opt over max": {"{device: jetson-orin-nano-super, format: tensorrt-int8, with: {opt_batch: 64}}",
			"opt_batch is larger than max_batch"},
		"coreml activations": {"{device: apple-a18, format: coreml-int8, with: {activations: asymmetric}}", "activations"},
		"openvino preset":    {"{device: intel-lunar-lake, format: openvino-int8, with: {preset: fast}}", "preset"},
		"old opset":          {"{device: x86-laptop, format: onnx-fp32, with: {opset: 11}}", "opset"},
		"unknown option":     {"{device: snapdragon-8-gen-3, format: tflite-int8, with: {keep_stem_float: true}}", "keep_stem_float"},
	} {
		_, err := load(t, "edgepipe: 1\nname: digits\ntask: image-classification\nmodel: {source: builtin:mobilenetv3-small-digits}\ntargets:\n  x: "+tc.target+"\n")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "r.yaml:6:") {
			t.Errorf("%s: %v, want an error at r.yaml:6 naming %q", name, err, tc.want)
		}
	}
}

func keysOf(m map[string]*plan.Step) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
