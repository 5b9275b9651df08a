package vision

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

// ReferenceStepID scores the fp32 PyTorch model on the evaluation set:
// every target of the recipe is gated against it.
const ReferenceStepID = "vision-eval:reference"

// expand adds a target's model and gate steps and, with bench:, the step
// that times the model.
func expand(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
	model, checks := expandModel(r, t, f, add)
	// The recipe validated that a target's own bench: has a runtime here;
	// one inherited from the recipe's top skips a format without one.
	if _, ok := benchRuntimeFor(t.Format); ok && t.Bench != nil {
		checks = append(checks, addBench(t, model, add).ID)
	}
	return model, checks
}

// expandModel: source -> vision-export (torch.onnx, fp32, dynamic batch, checked
// in ONNX Runtime; shared) -> vision-quantize (onnx-int8: static QDQ,
// calibrated) -> vision-eval (top-1 accuracy on ONNX Runtime against the
// PyTorch reference's, on the same images).
func expandModel(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
	ref := add(&plan.Step{ID: ReferenceStepID, Kind: KindEval, Needs: []string{plan.SourceStepID},
		Params: &EvalParams{Runtime: RuntimeTorch}, Data: plan.EvalData(r)}, t.Name)
	switch f.Name {
	case FormatTFLiteInt8:
		return expandTFLite(r, t, ref, add)
	case FormatCoreMLInt8:
		return expandCoreML(r, t, ref, add)
	}
	opset := plan.Or(exportOptions(t).Opset, DefaultOpset)
	model := add(&plan.Step{ID: "vision-export:fp32" + plan.OptionSuffix(t.Options, "opset"), Kind: KindExport,
		Needs: []string{plan.SourceStepID}, Params: &ExportParams{Opset: opset}, Data: plan.EvalData(r)}, t.Name)
	switch f.Name {
	case FormatQNNInt8:
		return expandQNN(r, t, model, ref, add)
	case FormatOpenVINOInt8:
		return expandOpenVINO(r, t, model, ref, add)
	case FormatTensorRTInt8:
		return expandTensorRT(r, t, model, ref, add)
	case FormatInt8:
		model = quantizeStep(r, t, t.Options.(*Int8Options), model, false, add)
	}
	return model, []string{onnxEval(r, t, model, ref, add).ID}
}

// onnxEval scores an ONNX model on ONNX Runtime's CPU provider against the
// reference.
func onnxEval(r *recipe.Recipe, t *recipe.Target, model, ref *plan.Step, add plan.AddFunc) *plan.Step {
	return add(&plan.Step{ID: "vision-eval:" + model.ID[strings.Index(model.ID, ":")+1:], Kind: KindEval,
		Needs: []string{model.ID, ref.ID}, Params: &EvalParams{Runtime: RuntimeONNX}, Data: plan.EvalData(r)}, t.Name)
}

// quantizeStep is ONNX Runtime's static QDQ quantization of the export;
// symmetric makes activations int8 with a zero point of 0, as TensorRT's
// explicit quantization requires (onnx-int8 keeps uint8 activations).
func quantizeStep(r *recipe.Recipe, t *recipe.Target, o *Int8Options, export *plan.Step, symmetric bool, add plan.AddFunc) *plan.Step {
	params := &QuantizeParams{Method: plan.Or(o.CalibrationMethod, DefaultCalibrationMethod),
		PerChannel: plan.Or(o.PerChannel, true), Samples: plan.Or(o.Samples, 0),
		KeepStem: plan.Or(o.KeepStem, true), KeepFloat: plan.Or(o.KeepFloat, ""), SymmetricActivations: symmetric,
		ReduceRange: !symmetric && plan.Or(o.ReduceRange, DefaultReduceRange)}
	suffix := plan.OptionSuffix(t.Options, "calibration_method", "per_channel", "calibration_samples", "keep_stem_float", "reduce_range")
	if o.KeepFloat != nil { // a regular expression: named by digest, never spelled in an id
		sum := sha256.Sum256([]byte(*o.KeepFloat))
		suffix += "+keep_float=" + hex.EncodeToString(sum[:4])
	}
	if symmetric {
		suffix = "+symmetric" + suffix
	}
	return add(&plan.Step{ID: "vision-quantize:int8" + strings.TrimPrefix(export.ID, "vision-export:fp32") + suffix,
		Kind: KindQuantize, Needs: []string{export.ID}, Params: params, Data: plan.CalibrationData(r)}, t.Name)
}

// Step kinds of the family.
const (
	KindExport   = "vision-export"
	KindQuantize = "vision-quantize"
	KindEval     = "vision-eval"
	// KindLiteRTConvert runs in the litert toolchain.
	KindLiteRTConvert = "litert-convert"
)

// Runtimes a vision-eval step scores with.
const (
	RuntimeTorch = "torch"
	RuntimeONNX  = "onnxruntime"
	// RuntimeLiteRT scores a .tflite with the LiteRT interpreter.
	RuntimeLiteRT = "litert"
)

// expandTFLite: source -> litert-convert (litert-torch, full-integer INT8,
// calibrated on data.calibration) -> vision-eval on the LiteRT interpreter,
// gated against the PyTorch reference on the same images. The converter
// takes the PyTorch model itself, not the ONNX export.
func expandTFLite(r *recipe.Recipe, t *recipe.Target, ref *plan.Step, add plan.AddFunc) (*plan.Step, []string) {
	o := t.Options.(*TFLiteOptions)
	params := &LiteRTParams{PerChannel: plan.Or(o.PerChannel, true), Samples: plan.Or(o.Samples, 0)}
	suffix := plan.OptionSuffix(t.Options, "per_channel", "calibration_samples")
	model := add(&plan.Step{ID: "litert-convert:tflite-int8" + suffix, Kind: KindLiteRTConvert,
		Needs: []string{plan.SourceStepID}, Params: params, Data: plan.CalibrationData(r)}, t.Name)
	check := add(&plan.Step{ID: "vision-eval:tflite-int8" + suffix, Kind: KindEval,
		Needs: []string{model.ID, ref.ID, plan.SourceStepID}, Params: &EvalParams{Runtime: RuntimeLiteRT}, Data: plan.EvalData(r)}, t.Name)
	return model, []string{check.ID}
}
