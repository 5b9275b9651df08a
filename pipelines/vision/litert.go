package vision

import (
	"context"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"os"
	"path/filepath"
	"strconv"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/pipelines/litert"
	litertreport "github.com/edgepipe/edgepipe/pipelines/litert/report"
	"github.com/edgepipe/edgepipe/steps"
)

// litertConvert makes tflite-int8: litert-torch converts the PyTorch
// classifier to a full-integer INT8 TFLite/LiteRT model, its activations
// calibrated on data.calibration, and the script refuses a result with a
// float convolution or fully-connected weight left.
type litertConvert struct{}

// TFLiteFile is the converted model inside the step's output.
const TFLiteFile = "model.tflite"

// LiteRTParams are a litert-convert step's.
type LiteRTParams struct {
	PerChannel bool `json:"per_channel"`
	// Samples caps the calibration images (0: all of them).
	Samples int `json:"samples"`
}

func (litertConvert) Name() string       { return KindLiteRTConvert }
func (litertConvert) Version() int       { return 1 }
func (litertConvert) NewParams() any     { return &LiteRTParams{} }
func (litertConvert) Tools(any) []string { return []string{litert.ToolConvert} }
func (litertConvert) Resources(any) steps.Resources {
	// torch.export, the PT2E observers and the LiteRT converter (TensorFlow's
	// MLIR passes) in one process: about 1.5 GB for a 1.5M-parameter model.
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 2048, ModelFactor: 8}
}

func (litertConvert) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[LiteRTParams](sc.Params)
	cal, err := sc.Data(steps.DataCalibration)
	if err != nil {
		return err
	}
	args := []string{"--model", src.Dir, "--out", filepath.Join(sc.Out, TFLiteFile), "--mode", "int8", "--calibration", cal}
	if !p.PerChannel {
		args = append(args, "--per-tensor")
	}
	if p.Samples > 0 {
		args = append(args, "--samples", strconv.Itoa(p.Samples))
	}
	if err := sc.RunTool(ctx, litert.ToolConvert, args...); err != nil {
		return err
	}
	var res litertreport.Convert
	if err := steps.ReadReport(litert.ToolConvert, sc.LogPath, &res); err != nil {
		return err
	}
	if res.Weights["int8"] == 0 || res.CalibrationSamples == 0 {
		return fmt.Errorf("litert-convert: %s reported %v weight operands and %d calibration images: no full-integer model (see %s)",
			litert.ToolConvert, res.Weights, res.CalibrationSamples, sc.LogPath)
	}
	// The app needs the classes and the preprocessing beside the model:
	// the classifier's config.json, as onnx-int8 ships it.
	cfg, err := os.ReadFile(filepath.Join(src.Dir, "config.json"))
	if err != nil {
		return fmt.Errorf("litert-convert: the source has no config.json: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(sc.Out, "config.json"), cfg, 0o644); err != nil {
		return err
	}
	sc.Result.SetFile("model", TFLiteFile)
	sc.Result.SetFact("format", fmt.Sprintf("TFLite/LiteRT full-integer INT8: int8 weights (symmetric, %s), int8 activations, %s input (scale %g, zero point %d)",
		map[bool]string{true: "per channel", false: "per tensor"}[p.PerChannel], res.Input.Dtype, res.Input.Scale, res.Input.ZeroPoint))
	sc.Result.SetMetric("tflite_bytes", float64(res.Bytes))
	sc.Result.SetMetric("convert_s", res.ConvertS)
	sc.Result.SetMetric("calibration_images", float64(res.CalibrationSamples))
	sc.Result.SetMetric("int8_weight_operands", float64(res.Weights["int8"]))
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
