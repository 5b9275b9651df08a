package vision

import (
	"context"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/pipelines/litert"
	litertreport "github.com/edgepipe/edgepipe/pipelines/litert/report"
	"github.com/edgepipe/edgepipe/pipelines/onnx"
	"github.com/edgepipe/edgepipe/pipelines/vision/report"
	"github.com/edgepipe/edgepipe/steps"
)

// visionExport exports the source classifier to fp32 ONNX with torch.onnx
// (vision_export.py) and checks the graph in ONNX Runtime against PyTorch.
type visionExport struct{}

// visionQuantize makes the static INT8 QDQ model with ONNX Runtime's
// quantize_static, calibrated on data.calibration.
type visionQuantize struct{}

// visionEval scores a classifier's top-1 accuracy on data.eval: the
// PyTorch reference, or an ONNX model against the reference's result.
type visionEval struct{}

// MaxExportLogitDiff is the export check's limit: the fp32 graph on ONNX
// Runtime against PyTorch, max |logit difference| over the checked
// images. Measured 1.1e-5 on the built-in model; a wrong graph (a
// BatchNorm left in training mode, a dropped layer) moves logits by units.
const MaxExportLogitDiff = 1e-3

// ExportParams are a vision-export step's.
type ExportParams struct {
	Opset int `json:"opset"`
}

func (visionExport) Name() string       { return KindExport }
func (visionExport) Version() int       { return 1 }
func (visionExport) NewParams() any     { return &ExportParams{} }
func (visionExport) Tools(any) []string { return []string{ToolExport} }
func (visionExport) Resources(any) steps.Resources {
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 1024, ModelFactor: 8}
}

func (visionExport) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[ExportParams](sc.Params)
	if p.Opset < 13 {
		return fmt.Errorf("vision-export: opset %d is too old: use 13 or newer (per-channel QuantizeLinear needs 13)", p.Opset)
	}
	set, err := sc.Data(steps.DataEval)
	if err != nil {
		return err
	}
	if err := sc.RunTool(ctx, ToolExport, "--model", src.Dir, "--set", set, "--out", sc.Out, "--opset", strconv.Itoa(p.Opset)); err != nil {
		return err
	}
	var res report.Export
	if err := steps.ReadReport(ToolExport, sc.LogPath, &res); err != nil {
		return err
	}
	if err := onnx.CheckFile(filepath.Join(sc.Out, res.Model)); err != nil {
		return err
	}
	if !res.DynamicBatch {
		return fmt.Errorf("vision-export: the exported graph's batch axis is fixed, but edgepipe exports a dynamic one (see %s)", sc.LogPath)
	}
	if res.CheckedImages == 0 {
		return fmt.Errorf("%s checked no images against PyTorch (see %s)", ToolExport, sc.LogPath)
	}
	diff := res.MaxAbsLogitDiff
	sc.Result.Checks = append(sc.Result.Checks, steps.Check{Name: "onnx-vs-pytorch",
		Passed: !math.IsNaN(diff) && diff <= MaxExportLogitDiff,
		Detail: fmt.Sprintf("max |logit difference| of ONNX Runtime against PyTorch over %d images, in batches of %v, is %.3g (limit %.3g)",
			res.CheckedImages, res.BatchSizes, diff, MaxExportLogitDiff)})
	sc.Result.SetFile("model", res.Model)
	sc.Result.SetMetric("opset", float64(res.Opset))
	sc.Result.SetMetric("max_abs_logit_diff", diff)
	sc.Result.SetFact("inputs", strings.Join(res.Inputs, ","))
	sc.Result.SetFact("batch", "dynamic")
	return nil
}

// QuantizeParams are a vision-quantize step's.
type QuantizeParams struct {
	Method     string `json:"method"`
	PerChannel bool   `json:"per_channel"`
	// Samples caps the calibration images (0: all of them).
	Samples int `json:"samples"`
	// KeepStem leaves the Conv that reads the image in float; KeepFloat
	// (a regular expression over node names) more nodes.
	KeepStem  bool   `json:"keep_stem"`
	KeepFloat string `json:"keep_float"`
	// SymmetricActivations: int8 activations with a zero point of 0
	// (TensorRT's explicit quantization) instead of uint8 with one.
	// omitempty keeps onnx-int8's cache keys.
	SymmetricActivations bool `json:"symmetric_activations,omitempty"`
	// ReduceRange: 7-bit weights, so that ONNX Runtime's uint8 x int8
	// kernels cannot saturate on x86 CPUs without VNNI.
	ReduceRange bool `json:"reduce_range,omitempty"`
}

func (visionQuantize) Name() string       { return KindQuantize }
func (visionQuantize) Version() int       { return 1 }
func (visionQuantize) NewParams() any     { return &QuantizeParams{} }
func (visionQuantize) Tools(any) []string { return []string{ToolQuantize} }
func (visionQuantize) Resources(any) steps.Resources {
	return steps.Resources{Cores: 1, MemoryMB: 1024, ModelFactor: 8}
}

func (visionQuantize) Run(ctx context.Context, sc *steps.Context) error {
	fp32, err := sc.Input(visionExport{})
	if err != nil {
		return err
	}
	p := steps.ParamsOf[QuantizeParams](sc.Params)
	switch p.Method {
	case "minmax", "entropy", "percentile":
	default:
		return fmt.Errorf("vision-quantize: calibration method %q is not minmax, entropy or percentile", p.Method)
	}
	if _, err := regexp.Compile(p.KeepFloat); err != nil {
		return fmt.Errorf("vision-quantize: keep_float %q is not a regular expression: %w", p.KeepFloat, err)
	}
	cal, err := sc.Data(steps.DataCalibration)
	if err != nil {
		return err
	}
	args := []string{"--in", filepath.Join(fp32.Dir, fp32.Result.Files["model"]), "--calibration", cal, "--out", sc.Out,
		"--method", p.Method, "--keep-float", p.KeepFloat}
	if !p.PerChannel {
		args = append(args, "--per-tensor")
	}
	if p.KeepStem {
		args = append(args, "--keep-stem")
	}
	if p.SymmetricActivations {
		args = append(args, "--symmetric-activations")
	}
	if p.ReduceRange {
		args = append(args, "--reduce-range")
	}
	if p.Samples > 0 {
		args = append(args, "--samples", strconv.Itoa(p.Samples))
	}
	if err := sc.RunTool(ctx, ToolQuantize, args...); err != nil {
		return err
	}
	var res report.Quantize
	if err := steps.ReadReport(ToolQuantize, sc.LogPath, &res); err != nil {
		return err
	}
	if err := onnx.CheckFile(filepath.Join(sc.Out, res.Model)); err != nil {
		return err
	}
	if res.QuantizeLinear == 0 || res.DequantizeLinear == 0 || res.Int8Initializers == 0 {
		return fmt.Errorf("vision-quantize: the model has no QuantizeLinear/DequantizeLinear pairs or int8 weights: nothing was quantized (see %s)", sc.LogPath)
	}
	if res.CalibrationImages == 0 {
		return fmt.Errorf("vision-quantize: no calibration images were read from %s", cal)
	}
	sc.Result.SetFile("model", res.Model)
	sc.Result.SetFact("method", p.Method)
	acts := "uint8 activations"
	if p.SymmetricActivations {
		acts = "int8 activations (symmetric, zero point 0: TensorRT's explicit quantization)"
	}
	weights := "int8 weights (symmetric, " + map[bool]string{true: "per channel", false: "per tensor"}[p.PerChannel]
	if p.ReduceRange {
		weights += ", 7-bit range: reduce_range"
	}
	sc.Result.SetFact("format", "QDQ: "+weights+"), "+acts)
	sc.Result.SetMetric("quantize_linear", float64(res.QuantizeLinear))
	sc.Result.SetMetric("dequantize_linear", float64(res.DequantizeLinear))
	sc.Result.SetMetric("int8_initializers", float64(res.Int8Initializers))
	sc.Result.SetMetric("float_conv_gemm", float64(res.FloatConvGemm))
	sc.Result.SetMetric("kept_float", float64(res.KeptFloat))
	sc.Result.SetMetric("calibration_images", float64(res.CalibrationImages))
	return nil
}

// EvalParams are a vision-eval step's.
type EvalParams struct {
	Runtime string `json:"runtime"`
	// SoCModel and HTPArch are the device's, for the qnn-htp runtime;
	// Images scores only the first N images there (0: all).
	SoCModel int `json:"soc_model,omitempty"`
	HTPArch  int `json:"htp_arch,omitempty"`
	Images   int `json:"images,omitempty"`
	// SimulateQDQ scores a QDQ model with ONNX Runtime's optimizations off
	// (Q/DQ computed as written): the exact int8 model TensorRT computes,
	// not ONNX Runtime's fused kernels, which saturate on AVX2 without VNNI.
	SimulateQDQ bool `json:"simulate_qdq,omitempty"`
}

// PredictionsFile holds a vision-eval step's predicted classes (.npy).
const PredictionsFile = "predictions.npy"

func (visionEval) Name() string   { return KindEval }
func (visionEval) Version() int   { return 1 }
func (visionEval) NewParams() any { return &EvalParams{} }
func (visionEval) Tools(params any) []string {
	if p, ok := params.(*EvalParams); ok {
		switch p.Runtime {
		case RuntimeLiteRT:
			return []string{litert.ToolValidate}
		case RuntimeOpenVINO:
			return []string{ToolOVEval}
		case RuntimeCoreMLMIL:
			return []string{ToolCoreMLEval}
		case RuntimeQNNHTP:
			return []string{ToolQNN}
		}
	}
	return []string{ToolEval}
}
func (visionEval) Resources(any) steps.Resources {
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 1024, ModelFactor: 8}
}

func (visionEval) Run(ctx context.Context, sc *steps.Context) error {
	p := steps.ParamsOf[EvalParams](sc.Params)
	set, err := sc.Data(steps.DataEval)
	if err != nil {
		return err
	}
	tool, args, ref, err := evalCommand(sc, p.Runtime, set)
	if err != nil {
		return err
	}
	if p.SimulateQDQ {
		if p.Runtime != RuntimeONNX {
			return fmt.Errorf("vision-eval: simulate_qdq applies to the %s runtime only, not %s", RuntimeONNX, p.Runtime)
		}
		args = append(args, "--simulate-qdq")
	}
	if err := sc.RunTool(ctx, tool, args...); err != nil {
		return err
	}
	res, err := readEval(sc, p, tool)
	if err != nil {
		return err
	}
	unlabelled := !res.Labelled
	if (res.Top1 == nil && !unlabelled) || res.Images == 0 {
		return fmt.Errorf("%s scored no images (see %s)", tool, sc.LogPath)
	}
	acc := &steps.Accuracy{Correct: res.Correct, Images: res.Images, Backend: res.Runtime, Agreement: res.Agreement, Unlabelled: unlabelled}
	if res.Top1 != nil {
		acc.Top1 = *res.Top1
	}
	if ref != nil {
		ra := ref.Result.Accuracy
		top := ra.Top1
		if p.Runtime == RuntimeQNNHTP && res.Images < ra.Images {
			// eval_images: the reference's top-1 over the same first
			// images, from its predictions.
			if res.SetImages != ra.Images || (res.ReferenceTop1 == nil && !unlabelled) {
				return fmt.Errorf("step %s scored %d of %d images, the reference %d, and reported no reference top-1 on them (see %s)",
					sc.StepID, res.Images, res.SetImages, ra.Images, sc.LogPath)
			}
			if res.ReferenceTop1 != nil {
				top = *res.ReferenceTop1
			}
		} else if ra.Images != res.Images {
			return fmt.Errorf("step %s scored %d images, the reference %d: they must score the same set", sc.StepID, res.Images, ra.Images)
		}
		acc.Reference, acc.ReferenceBackend = &top, ra.Backend
	}
	sc.Result.Accuracy = acc
	if !unlabelled {
		sc.Result.SetMetric("top1", acc.Top1)
	}
	if acc.Agreement != nil {
		sc.Result.SetMetric("agreement", *acc.Agreement)
	}
	return nil
}

// evalReport is what the scorers of every runtime report, in their
// common terms.
type evalReport struct {
	report.Eval
	// SetImages and ReferenceTop1 are vision_qnn.py's: the images of the
	// set (Images may be fewer) and the reference's top-1 on the images
	// scored.
	SetImages     int
	ReferenceTop1 *float64
}

// readEval decodes the report of the runtime's scorer and records what
// is particular to it (its time per image, the MIL interpreter's proof,
// the HTP simulator's images).
func readEval(sc *steps.Context, p *EvalParams, tool string) (evalReport, error) {
	switch p.Runtime {
	case RuntimeOpenVINO:
		var r report.OpenVINOEval
		if err := steps.ReadReport(tool, sc.LogPath, &r); err != nil {
			return evalReport{}, err
		}
		sc.Result.SetMetric("ms_per_image", r.MSPerImage)
		return evalReport{Eval: r.Eval}, nil
	case RuntimeLiteRT:
		return readLiteRTEval(sc, tool)
	case RuntimeCoreMLMIL:
		var r report.CoreMLEval
		if err := steps.ReadReport(tool, sc.LogPath, &r); err != nil {
			return evalReport{}, err
		}
		if r.InterpreterProof.Images == 0 {
			return evalReport{}, fmt.Errorf("%s did not prove its MIL interpreter on the FP32 package (see %s)", tool, sc.LogPath)
		}
		proof := r.InterpreterProof
		interpreterProof(sc, proof.Images, proof.MaxAbsLogitDiff, proof.Limit, proof.Passed)
		sc.Result.SetMetric("ms_per_image", r.MSPerImage)
		sc.Result.SetFact("ran_coreml", "no: Core ML runs only on Apple's systems; its MIL program was interpreted in PyTorch")
		return evalReport{Eval: r.Eval}, nil
	case RuntimeQNNHTP:
		var r report.QNN
		if err := steps.ReadReport(tool, sc.LogPath, &r); err != nil {
			return evalReport{}, err
		}
		if r.Eval == nil {
			return evalReport{}, fmt.Errorf("%s eval reported no eval result (see %s)", tool, sc.LogPath)
		}
		recordQNNEval(sc, p, r.Eval.Images, r.Eval.SetImages, r.Eval.MSPerImage)
		return evalReport{Eval: r.Eval.Eval, SetImages: r.Eval.SetImages, ReferenceTop1: r.Eval.ReferenceTop1}, nil
	}
	var r report.Eval
	err := steps.ReadReport(tool, sc.LogPath, &r)
	return evalReport{Eval: r}, err
}

// readLiteRTEval reads litert_validate.py's report (the litert family's
// type), which has names of its own for the same figures.
func readLiteRTEval(sc *steps.Context, tool string) (evalReport, error) {
	var res litertreport.Validate
	if err := steps.ReadReport(tool, sc.LogPath, &res); err != nil {
		return evalReport{}, err
	}
	sc.Result.SetMetric("ms_per_image", res.MSPerImage)
	correct := 0
	if res.Correct != nil {
		correct = *res.Correct
	}
	e := report.Eval{Top1: res.Top1, Correct: correct, Images: res.Samples, Labelled: res.Labelled,
		Runtime: "LiteRT interpreter (ai-edge-litert " + res.AIEdgeLiteRT + ", XNNPACK on the CPU)"}
	if res.Reference != nil {
		a := res.Reference.Agreement
		e.Agreement = &a
	}
	return evalReport{Eval: e}, nil
}

// evalCommand is the tool and arguments that score the step's model on the
// set with runtime, and the reference step it is compared with (nil for
// the reference itself). The model a converted target's eval scores is its
// first need (expand puts it there), the reference its eval need.
func evalCommand(sc *steps.Context, runtime, set string) (string, []string, *steps.Input, error) {
	args := []string{"--set", set, "--predictions", filepath.Join(sc.Out, PredictionsFile)}
	if runtime == RuntimeTorch {
		src, err := sc.Input(shared.Fetch)
		if err != nil {
			return "", nil, nil, err
		}
		return ToolEval, append(args, "--torch", src.Dir), nil, nil
	}
	if runtime != RuntimeONNX && runtime != RuntimeLiteRT && runtime != RuntimeCoreMLMIL && runtime != RuntimeQNNHTP && runtime != RuntimeOpenVINO {
		return "", nil, nil, fmt.Errorf("vision-eval: runtime %q is not %s, %s, %s, %s, %s or %s", runtime, RuntimeTorch, RuntimeONNX, RuntimeLiteRT, RuntimeCoreMLMIL, RuntimeQNNHTP, RuntimeOpenVINO)
	}
	if len(sc.Inputs) < 2 || sc.Inputs[0].Result == nil || sc.Inputs[0].Result.Files["model"] == "" {
		return "", nil, nil, fmt.Errorf("step %s needs, first, the step that made the model it scores, then the reference", sc.StepID)
	}
	model := filepath.Join(sc.Inputs[0].Dir, sc.Inputs[0].Result.Files["model"])
	r, err := sc.Input(visionEval{})
	if err != nil {
		return "", nil, nil, err
	}
	if r.Result == nil || r.Result.Accuracy == nil {
		return "", nil, nil, fmt.Errorf("step %s: the reference step %s recorded no accuracy", sc.StepID, r.StepID)
	}
	args = append(args, "--reference", filepath.Join(r.Dir, PredictionsFile))
	switch runtime {
	case RuntimeONNX:
		return ToolEval, append(args, "--onnx", model), &r, nil
	case RuntimeOpenVINO: // config.json is beside the IR
		return ToolOVEval, append(args, "--model", model, "--threads", strconv.Itoa(sc.NumThreads())), &r, nil
	case RuntimeCoreMLMIL:
		args, err := coremlEvalArgs(sc, args, model)
		return ToolCoreMLEval, args, &r, err
	case RuntimeQNNHTP:
		more, err := qnnEvalArgs(steps.ParamsOf[EvalParams](sc.Params), model)
		return ToolQNN, append(append([]string{"eval"}, args...), more...), &r, err
	}
	// The LiteRT scorer preprocesses with the source folder's config.json.
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return "", nil, nil, err
	}
	return litert.ToolValidate, append(args, "--model", model, "--config", src.Dir, "--threads", strconv.Itoa(sc.NumThreads())), &r, nil
}
