package standin

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/standin"
	onnxstandin "github.com/edgepipe/edgepipe/pipelines/onnx/standin"
	"github.com/edgepipe/edgepipe/pipelines/vision/report"
)

// OpenVINO (openvino-int8) and TensorRT (tensorrt-int8) stand-ins: they read
// the real export, calibration set and classifier config, and nothing in
// them was computed by NNCF, OpenVINO or TensorRT.
func init() {
	standin.Tools["openvino_vision_quantize.py"] = ovQuantize
	standin.Tools["openvino_vision_eval.py"] = ovEval
	standin.Tools["trtexec"] = trtexec
}

// irMarker starts the stand-in IR's metadata, an XML comment after the
// <net> element, so the file still opens like an IR.
const irMarker = "<!-- edgepipe-standin-vision "

type irHeader struct {
	Source string `json:"source_sha256"`
	// Salt is what the int8 model's errors depend on (see flipRate).
	Salt string `json:"salt"`
}

// ovQuantize: openvino_vision_quantize.py --in F.onnx --calibration NPZ --out DIR
// [--preset P] [--fast-bias-correction] [--overflow-fix F] [--samples N] [--keep-stem] [--threads N]
func ovQuantize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("openvino_vision_quantize", flag.ContinueOnError)
	in, cal, out := fs.String("in", "", ""), fs.String("calibration", "", ""), fs.String("out", "", "")
	preset, overflow := fs.String("preset", "performance", ""), fs.String("overflow-fix", "first_layer", "")
	fast, keepStem := fs.Bool("fast-bias-correction", false, ""), fs.Bool("keep-stem", false, "")
	samples := fs.Int("samples", 0, "")
	fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" || *cal == "" || *out == "" {
		return errors.New("usage (stand-in): openvino_vision_quantize.py --in MODEL.onnx --calibration NPZ --out DIR")
	}
	h, payload, err := onnxstandin.ReadONNX(*in)
	if err != nil {
		return err
	}
	if h.Kind != "fp32" {
		return fmt.Errorf("%s is already quantized (%s): NNCF takes the fp32 export", *in, h.Kind)
	}
	if _, err := readConfig(filepath.Dir(*in)); err != nil {
		return err
	}
	n, calSum, err := calibrationDigest(*cal, *samples)
	if err != nil {
		return err
	}
	ih := irHeader{Source: h.Source, Salt: fmt.Sprintf("%s openvino preset=%s fast_bias=%t overflow_fix=%s keep_stem=%t",
		calSum, *preset, *fast, *overflow, *keepStem)}
	meta, _ := json.Marshal(ih)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	xml := fmt.Sprintf("<?xml version=\"1.0\"?>\n<net name=\"standin\" version=\"11\">\n%s%s -->\n</net>\n", irMarker, meta)
	if err := os.WriteFile(filepath.Join(*out, "model.xml"), []byte(xml), 0o644); err != nil {
		return err
	}
	bin := standin.Resample(payload, 0.25)
	if err := os.WriteFile(filepath.Join(*out, "model.bin"), bin, 0o644); err != nil {
		return err
	}
	if err := standin.CopyCheckpointFiles(filepath.Dir(*in), *out); err != nil {
		return err
	}
	kept := []string{}
	if *keepStem {
		kept = []string{"/stem/Conv/WithoutBiases"}
	}
	return standin.PrintJSON(stdout, report.OpenVINOQuantize{Model: "model.xml", Files: []string{"config.json", "model.bin", "model.xml"},
		FakeQuantize: 60, Int8WeightConstants: 50, Convolutions: 52, Int8Convolutions: 52 - len(kept),
		FloatConvolutions: kept, KeptFloat: kept, Executed: map[string]int{"Convolution:u8": 52 - len(kept)},
		CalibrationImages: n, Preset: *preset, FastBiasCorrection: *fast, OverflowFix: *overflow,
		Bytes: int64(len(xml) + len(bin)), Weights: map[string]report.WeightCensus{"i8": {Constants: 50, Elements: int64(len(bin)), Bytes: int64(len(bin))}},
		Versions: map[string]string{"openvino": "stand-in", "nncf": "stand-in"}})
}

// calibrationDigest reads the first n images of a calibration set (all
// when n is 0) and digests them.
func calibrationDigest(path string, n int) (int, string, error) {
	s, err := readImageSet(path)
	if err != nil {
		return 0, "", err
	}
	count := len(s.Labels)
	if n > 0 {
		count = min(count, n)
	}
	c := sha256.New()
	for i := 0; i < count; i++ {
		c.Write(s.image(i))
	}
	return count, fmt.Sprintf("%x", c.Sum(nil)[:8]), nil
}

func readIRHeader(xml string) (irHeader, error) {
	var h irHeader
	b, err := os.ReadFile(xml)
	if err != nil {
		return h, err
	}
	i := bytes.Index(b, []byte(irMarker))
	if i < 0 {
		return h, fmt.Errorf("%s: OpenVINO refused it (not a stand-in vision IR)", xml)
	}
	rest := b[i+len(irMarker):]
	end := bytes.Index(rest, []byte(" -->"))
	if end < 0 || json.Unmarshal(rest[:end], &h) != nil || h.Source == "" {
		return h, fmt.Errorf("%s: a stand-in IR with a broken header", xml)
	}
	if _, err := os.Stat(strings.TrimSuffix(xml, ".xml") + ".bin"); err != nil {
		return h, fmt.Errorf("%s has no .bin beside it", xml)
	}
	return h, nil
}

// ovEval: openvino_vision_eval.py --model DIR/model.xml --set NPZ --predictions OUT.npy
// [--reference REF.npy] [--threads N]
func ovEval(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("openvino_vision_eval", flag.ContinueOnError)
	model, set, preds, ref := fs.String("model", "", ""), fs.String("set", "", ""), fs.String("predictions", "", ""), fs.String("reference", "", "")
	fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *set == "" || *preds == "" {
		return errors.New("usage (stand-in): openvino_vision_eval.py --model DIR/model.xml --set NPZ --predictions OUT.npy")
	}
	h, err := readIRHeader(*model)
	if err != nil {
		return err
	}
	cfg, err := readConfig(filepath.Dir(*model))
	if err != nil {
		return err
	}
	s, err := readImageSet(*set)
	if err != nil {
		return err
	}
	pred, correct, err := classify(s, *set, h.Source, h.Salt, cfg.NumClasses)
	if err != nil {
		return err
	}
	if err := writeInt64NPY(*preds, pred); err != nil {
		return err
	}
	e, err := evalReport(s, pred, correct, "openvino (stand-in) CPU plugin", *ref)
	if err != nil {
		return err
	}
	return standin.PrintJSON(stdout, report.OpenVINOEval{Eval: e})
}

// trtexec --onnx=F --stronglyTyped --saveEngine=E --minShapes=S --optShapes=S --maxShapes=S
// [--skipInference] [--profilingVerbosity=detailed] [--exportLayerInfo=J]
func trtexec(args []string, stdout, stderr io.Writer) error {
	flags := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		flags[k] = v
	}
	onnx, engine := flags["--onnx"], flags["--saveEngine"]
	if onnx == "" || engine == "" || flags["--minShapes"] == "" || flags["--optShapes"] == "" || flags["--maxShapes"] == "" {
		return errors.New("usage (stand-in): trtexec --onnx=F --saveEngine=E --minShapes=.. --optShapes=.. --maxShapes=SHAPES")
	}
	h, payload, err := onnxstandin.ReadONNX(onnx)
	if err != nil {
		return err
	}
	// TensorRT's explicit quantization takes int8 Q/DQ with a zero point of 0.
	if h.Kind != "int8" || !strings.Contains(h.Weights, "symmetric_activations=true") {
		return fmt.Errorf("%s: not a QDQ model with symmetric int8 activations (kind %s): TensorRT refuses uint8 or zero-point Q/DQ", onnx, h.Kind)
	}
	if err := os.MkdirAll(filepath.Dir(engine), 0o755); err != nil {
		return err
	}
	body := append([]byte("edgepipe stand-in TensorRT engine (not a TensorRT engine) "+flags["--optShapes"]+"\n"), standin.Resample(payload, 0.5)...)
	if err := os.WriteFile(engine, body, 0o644); err != nil {
		return err
	}
	if li := flags["--exportLayerInfo"]; li != "" {
		layers := []map[string]any{{"Name": "stem", "Precision": "FP32"}}
		for i := 0; i < 51; i++ {
			layers = append(layers, map[string]any{"Name": fmt.Sprintf("conv%d", i), "Precision": "Int8"})
		}
		b, _ := json.Marshal(map[string]any{"Layers": layers})
		if err := os.WriteFile(li, b, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "[I] stand-in build of %s\n&&&& PASSED TensorRT.trtexec [TensorRT vstand-in] # trtexec %s\n", onnx, strings.Join(args, " "))
	return nil
}
