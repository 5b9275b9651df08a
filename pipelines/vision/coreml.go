package vision

import (
	"context"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"os"
	"path/filepath"
	"strconv"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/pipelines/vision/report"
	"github.com/edgepipe/edgepipe/steps"
)

// The Core ML toolchain of image classifiers: the coreml toolchain's pins
// (coremltools 9.0, torch 2.7.0) plus the built-in models' definitions
// (torchvision, timm), in an environment of its own so that the coreml
// lock, and every cached Core ML LLM step keyed by it, stays as it is.
const (
	CoreMLToolchain = "coreml-vision"
	// ToolCoreMLConvert converts a classifier folder to an FP32 or W8A8
	// ML program.
	ToolCoreMLConvert = "coreml_vision_convert.py"
	// ToolCoreMLEval scores a package by interpreting its MIL program
	// (coreml_mil.py, which both import: its digest is in their keys).
	ToolCoreMLEval = "coreml_vision_eval.py"
)

// KindCoreMLConvert runs coreml_vision_convert.py.
const KindCoreMLConvert = "coreml-vision-convert"

// RuntimeCoreMLMIL scores a Core ML package with edgepipe's MIL
// interpreter: Core ML itself runs only on Apple's systems.
const RuntimeCoreMLMIL = "coreml-mil"

// CoreMLPackage is the converted package inside the step's output.
const CoreMLPackage = "model.mlpackage"

// CoreMLProofStepID converts the unquantized FP32 package on which every
// coreml-int8 check first proves the interpreter against PyTorch.
const CoreMLProofStepID = KindCoreMLConvert + ":fp32"

func coreMLSpec() toolchain.Spec {
	return toolchain.Python(CoreMLToolchain, locks, []string{ToolCoreMLConvert, ToolCoreMLEval},
		"coremltools 9.0 with torch 2.7.0, torchvision 0.22.0 and timm 1.0.31: Core ML conversion of image classifiers "+
			"(FP32 and W8A8, calibrated), checked by interpreting the package's MIL program in PyTorch; "+
			"Core ML prediction itself needs macOS or iOS and does not run here").
		WithPackages("python", "coremltools", "torch", "torchvision", "timm").
		// coremltools' blob reader (libmilstoragepython) is what the MIL interpreter reads weights with.
		WithSmokeImport("import torch, torchvision, timm, coremltools, coremltools.libmilstoragepython")
}

// coreMLRuntime is Core ML itself, for doctor: it never runs here.
func coreMLRuntime() toolchain.Spec {
	return toolchain.External("coreml-runtime", []string{"xcrun"},
		"not run here: Core ML itself (prediction; `xcrun coremlcompiler` compiles a package) exists only on macOS and iOS. "+
			"coreml-int4 and coreml-int8 are converted here with coremltools and checked without it: coreml-int8 by interpreting "+
			"the package's own MIL program in PyTorch (coreml_mil.py), proven first on the FP32 package against PyTorch")
}

// expandCoreML: source -> coreml-vision-convert:int8 (W8A8, calibrated on
// data.calibration) -> vision-eval with the MIL interpreter, which first
// proves itself on coreml-vision-convert:fp32 (shared by every target)
// against PyTorch, then is gated against the reference like every runtime.
func expandCoreML(r *recipe.Recipe, t *recipe.Target, ref *plan.Step, add plan.AddFunc) (*plan.Step, []string) {
	o := t.Options.(*CoreMLOptions)
	params := &CoreMLParams{Mode: "int8", PerChannel: plan.Or(o.PerChannel, true), Samples: plan.Or(o.Samples, 0),
		KeepStem: plan.Or(o.KeepStem, DefaultCoreMLKeepStem), Activations: plan.Or(o.Activations, DefaultCoreMLActivations)}
	suffix := plan.OptionSuffix(t.Options, "per_channel", "calibration_samples", "keep_stem_float", "activations")
	proof := add(&plan.Step{ID: CoreMLProofStepID, Kind: KindCoreMLConvert, Needs: []string{plan.SourceStepID},
		Params: &CoreMLParams{Mode: "fp32"}}, t.Name)
	model := add(&plan.Step{ID: KindCoreMLConvert + ":int8" + suffix, Kind: KindCoreMLConvert,
		Needs: []string{plan.SourceStepID}, Params: params, Data: plan.CalibrationData(r)}, t.Name)
	check := add(&plan.Step{ID: "vision-eval:coreml-int8" + suffix, Kind: KindEval,
		Needs: []string{model.ID, ref.ID, proof.ID, plan.SourceStepID}, Params: &EvalParams{Runtime: RuntimeCoreMLMIL},
		Data: plan.EvalData(r)}, t.Name)
	return model, []string{check.ID}
}

// coremlConvert makes an ML program of the classifier: FP32 (the
// interpreter's proof) or W8A8 (coreml-int8). The script refuses a W8A8
// package with a float convolution weight or without quantize/dequantize
// ops; this step checks its report says so too.
type coremlConvert struct{}

// CoreMLParams are a coreml-vision-convert step's.
type CoreMLParams struct {
	// Mode is fp32 or int8.
	Mode       string `json:"mode"`
	PerChannel bool   `json:"per_channel"`
	// Samples caps the calibration images (0: all of them).
	Samples int `json:"samples"`
	// KeepStem leaves the first convolution float; Activations is
	// symmetric (coremltools' default) or affine (a zero point). Both
	// omitempty: the fp32 proof step, which takes neither, keeps its key.
	KeepStem    bool   `json:"keep_stem,omitempty"`
	Activations string `json:"activations,omitempty"`
}

func (coremlConvert) Name() string       { return KindCoreMLConvert }
func (coremlConvert) Version() int       { return 1 }
func (coremlConvert) NewParams() any     { return &CoreMLParams{} }
func (coremlConvert) Tools(any) []string { return []string{ToolCoreMLConvert} }
func (coremlConvert) Resources(any) steps.Resources {
	// coremltools' passes, torch and, in int8 mode, every intermediate value
	// of one image (the interpreted calibration): about 2 GB for
	// EfficientNet-Lite0.
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 2048, ModelFactor: 8}
}

func (coremlConvert) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[CoreMLParams](sc.Params)
	args := []string{"--model", src.Dir, "--out", filepath.Join(sc.Out, CoreMLPackage), "--mode", p.Mode}
	switch p.Mode {
	case "fp32":
	case "int8":
		cal, err := sc.Data(steps.DataCalibration)
		if err != nil {
			return err
		}
		args = append(args, "--calibration", cal)
		if !p.PerChannel {
			args = append(args, "--per-tensor")
		}
		if p.Samples > 0 {
			args = append(args, "--samples", strconv.Itoa(p.Samples))
		}
		if p.KeepStem {
			args = append(args, "--keep-stem")
		}
		switch p.Activations {
		case "", "symmetric":
		case "affine":
			args = append(args, "--activations", "affine")
		default:
			return fmt.Errorf("%s: activations %q is not symmetric or affine", KindCoreMLConvert, p.Activations)
		}
	default:
		return fmt.Errorf("%s: mode %q is not fp32 or int8", KindCoreMLConvert, p.Mode)
	}
	if err := sc.RunTool(ctx, ToolCoreMLConvert, args...); err != nil {
		return err
	}
	var res report.CoreMLConvert
	if err := steps.ReadReport(ToolCoreMLConvert, sc.LogPath, &res); err != nil {
		return err
	}
	if res.Convs == 0 {
		return fmt.Errorf("%s: %s reported no convolution: not an image classifier's program (see %s)", KindCoreMLConvert, ToolCoreMLConvert, sc.LogPath)
	}
	if p.Mode == "int8" {
		kept := 0 // the stem, when asked: the one convolution allowed to stay float
		if p.KeepStem {
			kept = 1
		}
		if len(res.KeptFloat) != kept || res.Int8Convs+kept != res.Convs || res.QuantizeOps == 0 || res.DequantizeOps == 0 || res.CalibrationImages == 0 {
			return fmt.Errorf("%s: %d of %d convolutions have int8 weights, %d quantize and %d dequantize ops, %d calibration images: not a W8A8 package (see %s)",
				KindCoreMLConvert, res.Int8Convs, res.Convs, res.QuantizeOps, res.DequantizeOps, res.CalibrationImages, sc.LogPath)
		}
		// The app needs the classes beside the model, as every vision format ships them.
		cfg, err := os.ReadFile(filepath.Join(src.Dir, "config.json"))
		if err != nil {
			return fmt.Errorf("%s: the source has no config.json: %w", KindCoreMLConvert, err)
		}
		if err := atomicfile.Write(filepath.Join(sc.Out, "config.json"), cfg, 0o644); err != nil {
			return err
		}
		acts, stem := "symmetric", ""
		if p.Activations == "affine" {
			acts = "affine: a zero point"
		}
		if p.KeepStem {
			stem = "; the stem (" + res.KeptFloat[0] + ") in float"
		}
		sc.Result.SetFact("format", fmt.Sprintf("Core ML ML program (iOS 17+), W8A8: int8 weights (symmetric, %s), int8 activations (%s; quantize/dequantize, calibrated), FP16 compute; image input, RGB 0-255, normalization in the program%s",
			map[bool]string{true: "per channel", false: "per tensor"}[p.PerChannel], acts, stem))
		sc.Result.SetFact("census", fmt.Sprintf("%d of %d convolutions with int8 weights, %d int8 weight constants, %d quantize and %d dequantize ops, %d calibration images",
			res.Int8Convs, res.Convs, res.Int8Weights, res.QuantizeOps, res.DequantizeOps, res.CalibrationImages))
		sc.Result.SetMetric("quantize_ops", float64(res.QuantizeOps))
		sc.Result.SetMetric("dequantize_ops", float64(res.DequantizeOps))
		sc.Result.SetMetric("int8_weights", float64(res.Int8Weights))
		sc.Result.SetMetric("calibration_images", float64(res.CalibrationImages))
		sc.Result.SetMetric("quantize_s", res.QuantizeS)
	}
	sc.Result.SetFile("model", CoreMLPackage)
	sc.Result.SetFact("compute_precision", res.ComputePrecision)
	sc.Result.SetFact("ran_coreml", "no: Core ML runs only on Apple's systems; the package was built with coremltools and checked by interpreting its MIL program")
	sc.Result.SetMetric("package_bytes", float64(res.Bytes))
	sc.Result.SetMetric("convert_s", res.ConvertS)
	sc.Result.SetMetric("convs", float64(res.Convs))
	sc.Result.SetMetric("float_weights", float64(res.FloatWeights))
	ops := 0
	for _, n := range res.Ops {
		ops += n
	}
	sc.Result.SetMetric("ops", float64(ops))
	for name, v := range res.Versions {
		sc.Result.SetVersion(name, v)
	}
	return nil
}

// coremlEvalArgs are the MIL interpreter's arguments for a coreml-int8
// check: the package, the FP32 package it proves itself on first, and the
// PyTorch model both are compared with.
func coremlEvalArgs(sc *steps.Context, args []string, model string) ([]string, error) {
	var proof *steps.Input
	for i := range sc.Inputs {
		if sc.Inputs[i].StepID == CoreMLProofStepID {
			proof = &sc.Inputs[i]
		}
	}
	if proof == nil || proof.Result == nil || proof.Result.Files["model"] == "" {
		return nil, fmt.Errorf("step %s needs %s, the FP32 package the interpreter proves itself on", sc.StepID, CoreMLProofStepID)
	}
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return nil, err
	}
	return append(args, "--package", model, "--fp32-package", filepath.Join(proof.Dir, proof.Result.Files["model"]),
		"--torch", src.Dir), nil
}

// MaxInterpreterLogitDiff is the interpreter's proof limit: the FP32
// package interpreted against PyTorch, max |logit difference| (measured
// 1.05e-5 on the built-in digits model).
const MaxInterpreterLogitDiff = 1e-3

// interpreterProof records the eval's proof as a check: a failed proof
// fails the target, since then the interpreter's score says nothing about
// the package.
func interpreterProof(sc *steps.Context, images int, diff, limit float64, passed bool) {
	sc.Result.Checks = append(sc.Result.Checks, steps.Check{Name: "mil-interpreter-vs-pytorch",
		Passed: passed && limit <= MaxInterpreterLogitDiff,
		Detail: fmt.Sprintf("the FP32 package's MIL program, interpreted, against PyTorch over %d images: max |logit difference| %.3g (limit %.3g); Core ML did not run",
			images, diff, MaxInterpreterLogitDiff)})
	sc.Result.SetMetric("interpreter_max_abs_logit_diff", diff)
}
