// Package standin holds the vision family's stand-ins (see
// internal/standin): they read the real classifier folder and the real
// labelled image sets (.npz), and derive every prediction from the
// model's digest and each image's bytes, so a changed weight, image or
// calibration set changes what they report.
package standin

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/standin"
	onnxstandin "github.com/edgepipe/edgepipe/pipelines/onnx/standin"
	"github.com/edgepipe/edgepipe/pipelines/vision/report"
)

func init() {
	standin.Tools["vision_export.py"] = export
	standin.Tools["vision_quantize.py"] = quantize
	standin.Tools["vision_eval.py"] = eval
}

// Architectures are vision_data.ARCHITECTURES.
var Architectures = []string{"mobilenet_v3_small", "tf_efficientnet_lite0"}

// classifierConfig is the part of a vision model's config.json the
// stand-ins check.
type classifierConfig struct {
	Architecture string `json:"architecture"`
	NumClasses   int    `json:"num_classes"`
	InputSize    int    `json:"input_size"`
}

func readConfig(dir string) (classifierConfig, error) {
	var c classifierConfig
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return c, fmt.Errorf("no config.json in %s: not an image classifier folder", dir)
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Architecture == "" || c.NumClasses < 2 {
		return c, fmt.Errorf("%s/config.json has no architecture and num_classes: not an image classifier", dir)
	}
	// The architectures vision_data.build_model builds, and no other.
	if !slices.Contains(Architectures, c.Architecture) {
		return c, fmt.Errorf("architecture %q is not one edgepipe builds (%s)", c.Architecture, strings.Join(Architectures, ", "))
	}
	return c, nil
}

// export: vision_export.py --model DIR --set NPZ --out DIR [--opset N]
func export(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vision_export", flag.ContinueOnError)
	model, set, out := fs.String("model", "", ""), fs.String("set", "", ""), fs.String("out", "", "")
	opset := fs.Int("opset", 18, "")
	fs.Int("images", 64, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *set == "" || *out == "" {
		return errors.New("usage: vision_export.py --model DIR --set NPZ --out DIR [--opset N]")
	}
	cfg, err := readConfig(*model)
	if err != nil {
		return err
	}
	sum, err := standin.CheckpointDigest(*model)
	if err != nil {
		return err
	}
	s, err := readImageSet(*set)
	if err != nil {
		return err
	}
	weights, err := os.ReadFile(filepath.Join(*model, "model.safetensors"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	h := onnxstandin.ONNXHeader{StandIn: true, Kind: "fp32", Bits: 32, Opset: *opset, HiddenSize: cfg.NumClasses, Source: sum}
	if err := onnxstandin.WriteONNX(filepath.Join(*out, "model.onnx"), h, weights); err != nil {
		return err
	}
	if err := standin.CopyCheckpointFiles(*model, *out); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "stand-in export of %s (%s, %d classes)\n", *model, cfg.Architecture, cfg.NumClasses)
	return standin.PrintJSON(stdout, report.Export{Model: "model.onnx", Opset: *opset, Inputs: []string{"pixel_values"},
		Outputs: []string{"logits"}, DynamicBatch: true, MaxAbsLogitDiff: 1e-5,
		CheckedImages: min(64, len(s.Labels)), BatchSizes: []int{min(64, len(s.Labels)), 1, 7}, Bytes: int64(len(weights)),
		ONNXRuntime: "stand-in"})
}

// quantize: vision_quantize.py --in F --calibration NPZ --out DIR [--method M]
// [--per-tensor] [--samples N] [--keep-stem] [--keep-float RE] [--symmetric-activations] [--reduce-range]
func quantize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vision_quantize", flag.ContinueOnError)
	in, cal, out := fs.String("in", "", ""), fs.String("calibration", "", ""), fs.String("out", "", "")
	method := fs.String("method", "minmax", "")
	perTensor, keepStem := fs.Bool("per-tensor", false, ""), fs.Bool("keep-stem", false, "")
	symmetric := fs.Bool("symmetric-activations", false, "")
	reduceRange := fs.Bool("reduce-range", false, "")
	samples := fs.Int("samples", 0, "")
	keepFloat := fs.String("keep-float", "", "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	h, payload, err := onnxstandin.ReadONNX(*in)
	if err != nil {
		return err
	}
	if h.Kind != "fp32" {
		return fmt.Errorf("%s is already quantized (%s)", *in, h.Kind)
	}
	s, err := readImageSet(*cal)
	if err != nil {
		return err
	}
	n := len(s.Labels)
	if *samples > 0 {
		n = min(n, *samples)
	}
	c := sha256.New()
	for i := 0; i < n; i++ {
		c.Write(s.image(i))
	}
	// What the int8 model's error depends on: the calibration images and
	// the choices that cost accuracy (see eval's flip rate).
	h.Kind, h.Bits = "int8", 8
	h.Weights = fmt.Sprintf("%x method=%s per_tensor=%t keep_stem=%t keep_float=%s", c.Sum(nil)[:8], *method, *perTensor, *keepStem, *keepFloat)
	if *symmetric { // onnx-int8's salt stays what it was
		h.Weights += " symmetric_activations=true"
	}
	if !*reduceRange && !*symmetric {
		// 8-bit weights under uint8 activations: ONNX Runtime's kernels
		// saturate on CPUs without VNNI (flipRate). The default
		// (7-bit) keeps the salt it always had.
		h.Weights += " reduce_range=false"
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := onnxstandin.WriteONNX(filepath.Join(*out, "model.onnx"), h, standin.Resample(payload, 0.25)); err != nil {
		return err
	}
	if err := standin.CopyCheckpointFiles(filepath.Dir(*in), *out); err != nil {
		return err
	}
	kept := 0
	if *keepStem {
		kept++
	}
	return standin.PrintJSON(stdout, report.Quantize{Model: "model.onnx", QuantizeLinear: 100, DequantizeLinear: 200,
		Int8Initializers: 150, FloatConvGemm: kept, KeptFloat: kept, CalibrationImages: n, Method: *method,
		PerChannel: !*perTensor, Bytes: int64(len(payload) / 4), SymmetricActivations: *symmetric,
		ReduceRange: *reduceRange})
}

// flipRate is how often (out of 256) the stand-in int8 model gets an
// image wrong that the fp32 one got right: small with the defaults, a
// failing gate with the stem quantized or one scale per tensor (as the
// real model measured, see docs/vision.md).
func flipRate(weights string) int {
	rate := 1
	if strings.Contains(weights, "keep_stem=false") {
		rate += 8
	}
	if strings.Contains(weights, "per_tensor=true") {
		rate += 8
	}
	if strings.Contains(weights, "reduce_range=false") || strings.Contains(weights, "activations=symmetric") {
		rate += 4
	}
	return rate
}
