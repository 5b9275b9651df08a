package vision

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/pipelines/qnn"
	"github.com/edgepipe/edgepipe/pipelines/vision/report"
	"github.com/edgepipe/edgepipe/steps"
)

// FormatQNNInt8 is the Hexagon format of an image classifier: a QDQ model
// with uint8 activations and int8 weights (W8A8), compiled by QNN's HTP
// backend into a context binary for the device's SoC. It is named like its
// vision siblings (onnx-int8, tflite-int8: "INT8" is the domain's name for
// static W8A8 PTQ of a vision model); the LLM family's qnn-w8a16 and
// qnn-w4a16 spell out weights and activations because there they differ.
const FormatQNNInt8 = "qnn-int8"

// ToolQNN runs in the qnn family's toolchain (onnxruntime-qnn, which also
// carries ONNX Runtime's QNN quantization config).
const ToolQNN = "vision_qnn.py"

// Step kinds of qnn-int8.
const (
	KindQNNQuantize = "vision-qnn-quantize"
	KindQNNCompile  = "vision-qnn-compile"
	// RuntimeQNNHTP scores the compiled context binary on QNN's HTP
	// simulator.
	RuntimeQNNHTP = "qnn-htp"
)

// QNNOptions are qnn-int8's options.
type QNNOptions struct {
	ExportOptions `yaml:",inline"`
	PerChannel    *bool `yaml:"per_channel" doc:"One int8 scale per output channel of each Conv and Gemm weight (default true; QNN's quantization config keeps MatMul weights per tensor, QNN has no per-channel MatMul); false: one per tensor."`
	Samples       *int  `yaml:"calibration_samples" min:"1" doc:"Calibrate on the first N images of data.calibration (default: every image)."`
	EvalImages    *int  `yaml:"eval_images" min:"1" doc:"Score only the first N images of data.eval on the HTP simulator (default: every image; the simulator takes about 0.4 s per 32x32 digit and 2.8 s per 224x224 photo on this host). The gate's top-1, drop and agreement are then over those N images, the reference's too."`
}

// qnnQuantize makes the QDQ model with ONNX Runtime's QNN quantization
// config from the vision export, its batch fixed to 1.
type qnnQuantize struct{}

// QNNQuantizeParams are a vision-qnn-quantize step's.
type QNNQuantizeParams struct {
	PerChannel bool `json:"per_channel"`
	// Samples caps the calibration images (0: all of them).
	Samples int `json:"samples"`
}

func (qnnQuantize) Name() string       { return KindQNNQuantize }
func (qnnQuantize) Version() int       { return 1 }
func (qnnQuantize) NewParams() any     { return &QNNQuantizeParams{} }
func (qnnQuantize) Tools(any) []string { return []string{ToolQNN} }
func (qnnQuantize) Resources(any) steps.Resources {
	return steps.Resources{Cores: 1, MemoryMB: 1024, ModelFactor: 8}
}

func (qnnQuantize) Run(ctx context.Context, sc *steps.Context) error {
	fp32, err := sc.Input(visionExport{})
	if err != nil {
		return err
	}
	p := steps.ParamsOf[QNNQuantizeParams](sc.Params)
	cal, err := sc.Data(steps.DataCalibration)
	if err != nil {
		return err
	}
	args := []string{"quantize", "--in", filepath.Join(fp32.Dir, fp32.Result.Files["model"]), "--calibration", cal, "--out", sc.Out}
	if !p.PerChannel {
		args = append(args, "--per-tensor")
	}
	if p.Samples > 0 {
		args = append(args, "--samples", strconv.Itoa(p.Samples))
	}
	if err := sc.RunTool(ctx, ToolQNN, args...); err != nil {
		return err
	}
	var r report.QNN
	if err := steps.ReadReport(ToolQNN, sc.LogPath, &r); err != nil {
		return err
	}
	res := r.Quantize
	if res == nil {
		return fmt.Errorf("%s quantize reported no quantize result (see %s)", ToolQNN, sc.LogPath)
	}
	if res.DequantizeLinear == 0 || res.Int8Initializers == 0 || res.CalibrationImages == 0 {
		return fmt.Errorf("vision-qnn-quantize: %d DequantizeLinear nodes, %d 8-bit weights, %d calibration images: nothing was quantized (see %s)",
			res.DequantizeLinear, res.Int8Initializers, res.CalibrationImages, sc.LogPath)
	}
	// The HTP runs quantized ops; a float Conv or Gemm would run in fp16
	// there or be refused, and is not the INT8 model this format names.
	if res.FloatConvGemm > 0 {
		return fmt.Errorf("vision-qnn-quantize: %d Conv/Gemm/MatMul nodes kept float weights (see %s)", res.FloatConvGemm, sc.LogPath)
	}
	if p.PerChannel && res.PerChannelWeights == 0 {
		return fmt.Errorf("vision-qnn-quantize: per-channel weights were asked for, but no weight has a scale per channel (see %s)", sc.LogPath)
	}
	if len(res.Shape) == 0 || res.Shape[0] != 1 {
		return fmt.Errorf("vision-qnn-quantize: the QDQ model's input is %v, not a static batch of 1 (see %s)", res.Shape, sc.LogPath)
	}
	sc.Result.SetFile("model", res.Model)
	sc.Result.SetFact("format", fmt.Sprintf("QDQ for QNN (ONNX Runtime's get_qnn_qdq_config, MinMax): uint8 activations, int8 symmetric weights (%s), static input %v",
		map[bool]string{true: "Conv and Gemm per output channel", false: "per tensor"}[p.PerChannel], res.Shape))
	sc.Result.SetFact("batch", "1 (static: HTP graphs have static shapes; the export's dynamic batch axis is fixed to 1)")
	sc.Result.SetMetric("quantize_linear", float64(res.QuantizeLinear))
	sc.Result.SetMetric("dequantize_linear", float64(res.DequantizeLinear))
	sc.Result.SetMetric("int8_initializers", float64(res.Int8Initializers))
	sc.Result.SetMetric("per_channel_weights", float64(res.PerChannelWeights))
	sc.Result.SetMetric("calibration_images", float64(res.CalibrationImages))
	return nil
}

// qnnCompile compiles the QDQ model with QNN's HTP backend (onnxruntime-qnn)
// into a context binary for the device's SoC and the EPContext model that
// loads it, with CPU fallback disabled: the published model.
type qnnCompile struct{}

// QNNCompileParams are a vision-qnn-compile step's: the device and the QNN
// SoC model id and Hexagon architecture the catalog gives it.
type QNNCompileParams struct {
	Device   string `json:"device"`
	SoCModel int    `json:"soc_model"`
	HTPArch  int    `json:"htp_arch"`
}

func (qnnCompile) Name() string       { return KindQNNCompile }
func (qnnCompile) Version() int       { return 1 }
func (qnnCompile) NewParams() any     { return &QNNCompileParams{} }
func (qnnCompile) Tools(any) []string { return []string{ToolQNN} }
func (qnnCompile) Resources(any) steps.Resources {
	return steps.Resources{Cores: 1, MemoryMB: 1024, ModelFactor: 8}
}

func (qnnCompile) Run(ctx context.Context, sc *steps.Context) error {
	qdq, err := sc.Input(qnnQuantize{})
	if err != nil {
		return err
	}
	p := steps.ParamsOf[QNNCompileParams](sc.Params)
	if err := checkSoC(p.Device, p.SoCModel, p.HTPArch); err != nil {
		return err
	}
	if err := sc.RunTool(ctx, ToolQNN, "compile", "--qdq", filepath.Join(qdq.Dir, qdq.Result.Files["model"]), "--out", sc.Out,
		"--soc-model", strconv.Itoa(p.SoCModel), "--htp-arch", strconv.Itoa(p.HTPArch)); err != nil {
		if refused := qnn.RefusedNodes(sc.LogPath); refused != "" {
			return fmt.Errorf("QNN's HTP backend refused nodes of the classifier for %s (CPU fallback is disabled, so none runs on the CPU):\n%s\n%w", p.Device, refused, err)
		}
		return err
	}
	var r report.QNN
	if err := steps.ReadReport(ToolQNN, sc.LogPath, &r); err != nil {
		return err
	}
	res := r.Compile
	if res == nil {
		return fmt.Errorf("%s compile reported no compile result (see %s)", ToolQNN, sc.LogPath)
	}
	for _, f := range []string{res.Model, res.ContextBinary, "config.json"} {
		if st, err := os.Stat(filepath.Join(sc.Out, f)); f == "" || err != nil || st.Size() == 0 {
			return fmt.Errorf("vision-qnn-compile: %s exited 0 but wrote no EPContext model, context binary and config.json (missing %q)", ToolQNN, f)
		}
	}
	if res.EPContextNodes == 0 || res.QNNVersion == "" {
		return fmt.Errorf("vision-qnn-compile: %s reported %d EPContext nodes and QNN version %q (see %s)", ToolQNN, res.EPContextNodes, res.QNNVersion, sc.LogPath)
	}
	sc.Result.SetFile("model", res.Model)
	sc.Result.SetFile("context_binary", res.ContextBinary)
	sc.Result.SetVersion("qnn", res.QNNVersion)
	sc.Result.SetVersion("onnxruntime-qnn", res.ONNXRuntimeQNN)
	sc.Result.SetFact("backend", fmt.Sprintf("QNN %s HTP backend (Qualcomm's compiler, from onnxruntime-qnn %s): EPContext model + context binary for %s (soc_model %d, htp_arch v%d), CPU fallback disabled",
		res.QNNVersion, res.ONNXRuntimeQNN, p.Device, p.SoCModel, p.HTPArch))
	sc.Result.SetFact("soc", fmt.Sprintf("%s: soc_model %d, htp_arch v%d", p.Device, p.SoCModel, p.HTPArch))
	sc.Result.SetFact("compiled", fmt.Sprintf("%s: %d bytes, compiled in %.1f s on this host", res.ContextBinary, res.ContextBinaryBytes, res.CompileS))
	sc.Result.SetMetric("compile_seconds", res.CompileS)
	sc.Result.SetMetric("context_binary_bytes", float64(res.ContextBinaryBytes))
	return nil
}

// checkSoC refuses a device the catalog gives no QNN SoC model and HTP
// architecture: there is nothing to compile for.
func checkSoC(device string, soc, arch int) error {
	if soc <= 0 || arch <= 0 {
		return fmt.Errorf("%s: no QNN SoC model and HTP architecture are known for device %q: "+
			"use a device whose catalog entry has soc_model and htp_arch (edgepipe devices)", FormatQNNInt8, device)
	}
	return nil
}

// expandQNN: vision-export (shared) -> vision-qnn-quantize (QDQ for QNN,
// batch 1, calibrated on data.calibration) -> vision-qnn-compile (context
// binary for the device's SoC) -> vision-eval on the HTP simulator,
// gated against the PyTorch reference on the same images.
func expandQNN(r *recipe.Recipe, t *recipe.Target, export, ref *plan.Step, add plan.AddFunc) (*plan.Step, []string) {
	o := t.Options.(*QNNOptions)
	d, _ := catalog.Lookup(t.Device)
	suffix := plan.OptionSuffix(t.Options, "per_channel", "calibration_samples")
	exportSuffix := export.ID[len("vision-export:fp32"):]
	qdq := add(&plan.Step{ID: "vision-qnn-quantize:int8" + exportSuffix + suffix, Kind: KindQNNQuantize, Needs: []string{export.ID},
		Params: &QNNQuantizeParams{PerChannel: plan.Or(o.PerChannel, true), Samples: plan.Or(o.Samples, 0)},
		Data:   plan.CalibrationData(r)}, t.Name)
	compile := add(&plan.Step{ID: "vision-qnn-compile:" + d.ID + ":int8" + exportSuffix + suffix, Kind: KindQNNCompile, Needs: []string{qdq.ID},
		Params: &QNNCompileParams{Device: d.ID, SoCModel: d.SoCModel, HTPArch: d.HTPArch}}, t.Name)
	check := add(&plan.Step{ID: "vision-eval:qnn-htp:" + d.ID + ":int8" + exportSuffix + suffix + plan.OptionSuffix(t.Options, "eval_images"),
		Kind: KindEval, Needs: []string{compile.ID, ref.ID},
		Params: &EvalParams{Runtime: RuntimeQNNHTP, SoCModel: d.SoCModel, HTPArch: d.HTPArch, Images: plan.Or(o.EvalImages, 0)},
		Data:   plan.EvalData(r)}, t.Name)
	return compile, []string{check.ID}
}

// qnnEvalArgs are vision_qnn.py eval's arguments after the common ones:
// the compiled model scored on the HTP simulator, preprocessed by the
// config.json the compile step ships beside it.
func qnnEvalArgs(p *EvalParams, model string) ([]string, error) {
	if err := checkSoC("", p.SoCModel, p.HTPArch); err != nil {
		return nil, err
	}
	args := []string{"--model", model, "--config", filepath.Dir(model),
		"--soc-model", strconv.Itoa(p.SoCModel), "--htp-arch", strconv.Itoa(p.HTPArch)}
	if p.Images > 0 {
		args = append(args, "--images", strconv.Itoa(p.Images))
	}
	return args, nil
}

// recordQNNEval says where the gate's numbers come from: the HTP
// simulator on this host, over how many images; its time per image is the
// simulator's, never a phone's latency.
func recordQNNEval(sc *steps.Context, p *EvalParams, images, setImages int, msPerImage float64) {
	scored := fmt.Sprintf("all %d images", images)
	if images < setImages {
		scored = fmt.Sprintf("the first %d of %d images (eval_images)", images, setImages)
	}
	sc.Result.SetFact("validated", fmt.Sprintf("top-1 on %s of data.eval, run as the published EPContext model + context binary on QNN's HTP simulator "+
		"(soc_model %d, htp_arch v%d) with CPU fallback disabled; not run on a phone", scored, p.SoCModel, p.HTPArch))
	sc.Result.SetFact("simulator", fmt.Sprintf("%.0f ms per image on the HTP simulator (the simulator's speed on this host, not a device latency)", msPerImage))
	sc.Result.SetMetric("eval_images", float64(images))
	sc.Result.SetMetric("simulator_ms_per_image", msPerImage)
}
