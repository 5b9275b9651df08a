package vision

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/pipelines/openvino"
	"github.com/edgepipe/edgepipe/pipelines/vision/report"
	"github.com/edgepipe/edgepipe/steps"
)

// Tools of openvino-int8, in the openvino toolchain.
const (
	ToolOVQuantize = "openvino_vision_quantize.py"
	ToolOVEval     = "openvino_vision_eval.py"
	// ToolOVBench times an IR's single inferences on the CPU plugin the
	// eval scores it with (the bench protocol, BenchRuntime).
	ToolOVBench = "openvino_vision_bench.py"
)

// KindNNCFQuantize makes openvino-int8 for an image classifier.
const KindNNCFQuantize = "nncf-quantize"

// RuntimeOpenVINO scores an OpenVINO IR on OpenVINO's CPU plugin.
const RuntimeOpenVINO = "openvino"

// IRFile is the quantized model inside the step's output (model.bin and
// config.json beside it).
const IRFile = "model.xml"

// nncfQuantize makes openvino-int8: NNCF's post-training static
// quantization (nncf.quantize over the calibration images) of the fp32
// ONNX export, which OpenVINO's ONNX frontend reads, saved as OpenVINO IR.
// The export is the input rather than the PyTorch model through
// ov.convert_model: it is the graph already checked against PyTorch, its
// TensorFlow "same" padding is written as constant Pads (timm's traced
// arithmetic was what broke onnx-int8 on EfficientNet-Lite0), the
// openvino toolchain then needs neither timm nor a second tracer, and
// OpenVINO and ONNX Runtime quantize the very same graph, so their INT8
// results compare kernel path against kernel path.
type nncfQuantize struct{}

// NNCFParams are an nncf-quantize step's.
type NNCFParams struct {
	Preset             string `json:"preset"`
	FastBiasCorrection bool   `json:"fast_bias_correction"`
	OverflowFix        string `json:"overflow_fix"`
	// Samples caps the calibration images (0: all of them).
	Samples  int  `json:"samples"`
	KeepStem bool `json:"keep_stem"`
}

func (nncfQuantize) Name() string       { return KindNNCFQuantize }
func (nncfQuantize) Version() int       { return 1 }
func (nncfQuantize) NewParams() any     { return &NNCFParams{} }
func (nncfQuantize) Tools(any) []string { return []string{ToolOVQuantize} }
func (nncfQuantize) Resources(any) steps.Resources {
	// The ONNX graph, the converted ov.Model, NNCF's statistics and the
	// compiled model at once (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 1536, ModelFactor: 8}
}

// expandOpenVINO: the shared fp32 export -> nncf-quantize (static INT8,
// calibrated) -> vision-eval on OpenVINO's CPU plugin, gated against the
// PyTorch reference on the same images.
func expandOpenVINO(r *recipe.Recipe, t *recipe.Target, export, ref *plan.Step, add plan.AddFunc) (*plan.Step, []string) {
	o := t.Options.(*OpenVINOOptions)
	params := &NNCFParams{Preset: plan.Or(o.Preset, DefaultOVPreset), FastBiasCorrection: plan.Or(o.FastBiasCorrection, false),
		OverflowFix: plan.Or(o.OverflowFix, DefaultOVOverflowFix), Samples: plan.Or(o.Samples, 0), KeepStem: plan.Or(o.KeepStem, true)}
	suffix := plan.OptionSuffix(t.Options, "preset", "fast_bias_correction", "overflow_fix", "calibration_samples", "keep_stem_float")
	model := add(&plan.Step{ID: KindNNCFQuantize + ":" + FormatOpenVINOInt8 + suffix, Kind: KindNNCFQuantize,
		Needs: []string{export.ID}, Params: params, Data: plan.CalibrationData(r)}, t.Name)
	check := add(&plan.Step{ID: "vision-eval:" + FormatOpenVINOInt8 + suffix, Kind: KindEval,
		Needs: []string{model.ID, ref.ID}, Params: &EvalParams{Runtime: RuntimeOpenVINO}, Data: plan.EvalData(r)}, t.Name)
	return model, []string{check.ID}
}

func (nncfQuantize) Run(ctx context.Context, sc *steps.Context) error {
	fp32, err := sc.Input(visionExport{})
	if err != nil {
		return err
	}
	p := steps.ParamsOf[NNCFParams](sc.Params)
	if p.Preset != "performance" && p.Preset != "mixed" {
		return fmt.Errorf("nncf-quantize: preset %q is not performance or mixed", p.Preset)
	}
	switch p.OverflowFix {
	case "enable", "first_layer", "disable":
	default:
		return fmt.Errorf("nncf-quantize: overflow_fix %q is not enable, first_layer or disable", p.OverflowFix)
	}
	cal, err := sc.Data(steps.DataCalibration)
	if err != nil {
		return err
	}
	args := []string{"--in", filepath.Join(fp32.Dir, fp32.Result.Files["model"]), "--calibration", cal, "--out", sc.Out,
		"--preset", p.Preset, "--overflow-fix", p.OverflowFix, "--threads", strconv.Itoa(sc.NumThreads())}
	if p.FastBiasCorrection {
		args = append(args, "--fast-bias-correction")
	}
	if p.KeepStem {
		args = append(args, "--keep-stem")
	}
	if p.Samples > 0 {
		args = append(args, "--samples", strconv.Itoa(p.Samples))
	}
	if err := sc.RunTool(ctx, ToolOVQuantize, args...); err != nil {
		return err
	}
	var res report.OpenVINOQuantize
	if err := steps.ReadReport(ToolOVQuantize, sc.LogPath, &res); err != nil {
		return err
	}
	if res.Model != IRFile {
		return fmt.Errorf("%s reported the model %q, not %s (see %s)", ToolOVQuantize, res.Model, IRFile, sc.LogPath)
	}
	if err := openvino.CheckIR(filepath.Join(sc.Out, IRFile)); err != nil {
		return err
	}
	if err := checkInt8(res, sc.LogPath); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(sc.Out, "config.json")); err != nil {
		return fmt.Errorf("nncf-quantize: no config.json beside the IR: %w", err)
	}
	recordOV(sc, p, res)
	return nil
}

// checkInt8 refuses an IR whose convolutions are not int8: NNCF can
// return a model it left (partly) float, for instance when it matched no
// pattern it knows, and the gate would then pass a float model as INT8.
// Only the layers the step asked to keep float (the stem) may be float.
func checkInt8(res report.OpenVINOQuantize, log string) error {
	if res.CalibrationImages == 0 {
		return fmt.Errorf("nncf-quantize: no calibration images were read (see %s)", log)
	}
	if res.FakeQuantize == 0 || res.Int8WeightConstants == 0 || res.Int8Convolutions == 0 {
		return fmt.Errorf("nncf-quantize: the IR has %d FakeQuantize nodes, %d int8 weight constants and %d of %d convolutions with int8 weights: "+
			"nothing was quantized (see %s)", res.FakeQuantize, res.Int8WeightConstants, res.Int8Convolutions, res.Convolutions, log)
	}
	kept := map[string]bool{}
	for _, k := range res.KeptFloat {
		kept[k] = true
	}
	var unasked []string
	for _, f := range res.FloatConvolutions {
		if !kept[f] {
			unasked = append(unasked, f)
		}
	}
	if len(unasked) > 0 {
		sort.Strings(unasked)
		return fmt.Errorf("nncf-quantize: %d of %d convolutions kept float weights that no option asked to keep float (%s): not an INT8 model (see %s)",
			len(unasked), res.Convolutions, strings.Join(unasked, ", "), log)
	}
	return nil
}

func recordOV(sc *steps.Context, p *NNCFParams, res report.OpenVINOQuantize) {
	sc.Result.SetFile("model", IRFile)
	sc.Result.SetFact("format", fmt.Sprintf("OpenVINO IR, NNCF static INT8: FakeQuantize on activations (%s preset) and int8 weights "+
		"(symmetric, per channel), overflow fix %s, %s bias correction", p.Preset, p.OverflowFix,
		map[bool]string{true: "fast", false: "full"}[p.FastBiasCorrection]))
	// The census of the IR as written, in the manifest (the note of the step).
	sc.Result.SetFact("int8_census", fmt.Sprintf("%d FakeQuantize, %d int8 weight constants, %d of %d convolutions with int8 weights",
		res.FakeQuantize, res.Int8WeightConstants, res.Int8Convolutions, res.Convolutions))
	if len(res.KeptFloat) > 0 {
		sc.Result.SetFact("kept_float", strings.Join(res.KeptFloat, ","))
	}
	var exec []string
	for k, n := range res.Executed {
		exec = append(exec, fmt.Sprintf("%s x%d", k, n))
	}
	sort.Strings(exec)
	// What the CPU plugin of the host that made it compiled: the precision
	// each convolution runs in here (u8/i8 for int8 kernels).
	sc.Result.SetFact("cpu_plugin_layers", strings.Join(exec, ", "))
	sc.Result.SetMetric("fake_quantize", float64(res.FakeQuantize))
	sc.Result.SetMetric("int8_weight_constants", float64(res.Int8WeightConstants))
	sc.Result.SetMetric("convolutions", float64(res.Convolutions))
	sc.Result.SetMetric("int8_convolutions", float64(res.Int8Convolutions))
	sc.Result.SetMetric("kept_float", float64(len(res.KeptFloat)))
	sc.Result.SetMetric("calibration_images", float64(res.CalibrationImages))
	sc.Result.SetMetric("ir_bytes", float64(res.Bytes))
	for name, v := range res.Versions {
		sc.Result.SetVersion(name, v)
	}
}
