package standin

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/vision/report"
)

func init() {
	standin.Tools["coreml_vision_convert.py"] = coremlConvert
	standin.Tools["coreml_vision_eval.py"] = coremlEval
}

// mlpackageMagic starts a stand-in package's spec file: a JSON header
// line, then bytes resampled from the weights (not a protobuf).
const mlpackageMagic = "EDGEPIPE-STANDIN-MLPACKAGE\n"

// specPath is where a package keeps its spec, as coremltools saves it.
const specPath = "Data/com.apple.CoreML/model.mlmodel"

type mlpackageHeader struct {
	Source string `json:"source_sha256"`
	Mode   string `json:"mode"`
	// Salt is what the int8 model's errors depend on (see flipRate).
	Salt string `json:"salt,omitempty"`
}

// coremlConvert: coreml_vision_convert.py --model DIR --out OUT.mlpackage
// --mode fp32|int8 [--calibration NPZ] [--samples N] [--per-tensor]
// [--keep-stem] [--activations symmetric|affine]
func coremlConvert(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("coreml_vision_convert", flag.ContinueOnError)
	model, out, mode := fs.String("model", "", ""), fs.String("out", "", ""), fs.String("mode", "", "")
	cal := fs.String("calibration", "", "")
	samples := fs.Int("samples", 0, "")
	perTensor := fs.Bool("per-tensor", false, "")
	keepStem := fs.Bool("keep-stem", false, "")
	acts := fs.String("activations", "symmetric", "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *out == "" || (*mode != "fp32" && *mode != "int8") || (*mode == "int8") != (*cal != "") ||
		(*acts != "symmetric" && *acts != "affine") {
		return errors.New("usage (stand-in): coreml_vision_convert.py --model DIR --out OUT.mlpackage --mode fp32|int8 [--calibration NPZ]")
	}
	cfg, err := readConfig(*model)
	if err != nil {
		return err
	}
	sum, err := standin.CheckpointDigest(*model)
	if err != nil {
		return err
	}
	weights, err := os.ReadFile(filepath.Join(*model, "model.safetensors"))
	if err != nil {
		return err
	}
	h, n, scale := mlpackageHeader{Source: sum, Mode: *mode}, 0, 1.0
	if *mode == "int8" {
		s, err := readImageSet(*cal)
		if err != nil {
			return err
		}
		n = len(s.Labels)
		if *samples > 0 {
			n = min(n, *samples)
		}
		c := sha256.New()
		for i := 0; i < n; i++ {
			c.Write(s.image(i))
		}
		// With the defaults (stem in float, affine activations) the
		// stand-in flips at onnx-int8's default rate; more with the stem
		// in int8, symmetric activations or one scale per tensor
		// (flipRate), as the real model measured.
		h.Salt, scale = fmt.Sprintf("%x coreml per_tensor=%t", c.Sum(nil)[:8], *perTensor), 0.25
		if !*keepStem {
			h.Salt += " keep_stem=false"
		}
		if *acts == "symmetric" {
			h.Salt += " activations=symmetric"
		}
	}
	hb, _ := json.Marshal(h)
	body := append(append([]byte(mlpackageMagic), hb...), '\n')
	body = append(body, standin.Resample(weights, scale)...)
	if err := os.MkdirAll(filepath.Join(*out, filepath.Dir(specPath)), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, specPath), body, 0o644); err != nil {
		return err
	}
	manifest := `{"fileFormatVersion": "1.0.0", "itemInfoEntries": {"STANDIN": {"path": "com.apple.CoreML/model.mlmodel"}}, "rootModelIdentifier": "STANDIN"}` + "\n"
	if err := os.WriteFile(filepath.Join(*out, "Manifest.json"), []byte(manifest), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "stand-in Core ML %s conversion of %s (%s, %d classes), %d calibration images\n", *mode, *model, cfg.Architecture, cfg.NumClasses, n)
	res := report.CoreMLConvert{Model: *out, Mode: *mode, Bytes: int64(len(body) + len(manifest)),
		Ops: map[string]int{"conv": 52, "linear": 2}, FloatWeights: 54, Convs: 52, CalibrationImages: n,
		PerChannel: *mode == "int8" && !*perTensor, KeptFloat: []string{}, ComputePrecision: "fp32",
		Input: report.CoreMLInput{Name: "image", Kind: "imageType"}, Output: "logits",
		Versions: map[string]string{"coremltools": "stand-in"}}
	if *mode == "int8" {
		res.QuantizeOps, res.DequantizeOps, res.Int8Weights, res.FloatWeights, res.Int8Convs = 89, 95, 54, 0, 52
		res.ComputePrecision, res.Activations = "fp16", *acts
		if *keepStem {
			res.QuantizeOps, res.DequantizeOps, res.Int8Weights, res.FloatWeights, res.Int8Convs = 88, 94, 53, 1, 51
			res.KeptFloat = []string{"input_1"}
		}
	}
	return standin.PrintJSON(stdout, res)
}

func readMLPackageHeader(pkg string) (mlpackageHeader, error) {
	var h mlpackageHeader
	f, err := os.Open(filepath.Join(pkg, specPath))
	if err != nil {
		return h, fmt.Errorf("%s: not a Core ML package: %w", pkg, err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	magic := make([]byte, len(mlpackageMagic))
	if _, err := io.ReadFull(r, magic); err != nil || !bytes.Equal(magic, []byte(mlpackageMagic)) {
		return h, fmt.Errorf("%s: the MIL interpreter cannot read it (not a stand-in package)", pkg)
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(line, &h); err != nil || h.Source == "" {
		return h, fmt.Errorf("%s: a stand-in package with a broken header", pkg)
	}
	return h, nil
}

// coremlEval: coreml_vision_eval.py --package P --fp32-package P --torch DIR
// --set NPZ --predictions OUT.npy [--reference REF.npy]
func coremlEval(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("coreml_vision_eval", flag.ContinueOnError)
	pkg, fp32, torch := fs.String("package", "", ""), fs.String("fp32-package", "", ""), fs.String("torch", "", "")
	set, preds, ref := fs.String("set", "", ""), fs.String("predictions", "", ""), fs.String("reference", "", "")
	proofImages := fs.Int("proof-images", 16, "")
	limit := fs.Float64("proof-limit", 1e-3, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *pkg == "" || *fp32 == "" || *torch == "" || *set == "" || *preds == "" {
		return errors.New("usage (stand-in): coreml_vision_eval.py --package P --fp32-package P --torch DIR --set NPZ --predictions OUT.npy")
	}
	h, err := readMLPackageHeader(*pkg)
	if err != nil {
		return err
	}
	proof, err := readMLPackageHeader(*fp32)
	if err != nil {
		return err
	}
	cfg, err := readConfig(*torch)
	if err != nil {
		return err
	}
	sum, err := standin.CheckpointDigest(*torch)
	if err != nil {
		return err
	}
	s, err := readImageSet(*set)
	if err != nil {
		return err
	}
	// The proof: the FP32 package of this very model interprets to
	// PyTorch's logits; another model's package, or a quantized one, does not.
	diff := 1e-5
	if proof.Source != sum || proof.Mode != "fp32" {
		diff = 3.5
	}
	n := min(*proofImages, len(s.Labels))
	pred, correct, err := classify(s, *set, h.Source, h.Salt, cfg.NumClasses)
	if err != nil {
		return err
	}
	if err := writeInt64NPY(*preds, pred); err != nil {
		return err
	}
	e, err := evalReport(s, pred, correct, "MIL interpreter (stand-in); Core ML did not run", *ref)
	if err != nil {
		return err
	}
	return standin.PrintJSON(stdout, report.CoreMLEval{Eval: e,
		InterpreterProof: report.InterpreterProof{Images: n, MaxAbsLogitDiff: diff, Limit: *limit, Passed: diff <= *limit},
		Ops:              map[string]int{"conv": 52, "quantize": 89, "dequantize": 95}})
}
