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
	litertreport "github.com/edgepipe/edgepipe/pipelines/litert/report"
)

func init() {
	standin.Tools["litert_convert.py"] = litertConvert
	standin.Tools["litert_validate.py"] = litertValidate
}

// tfliteMagic starts a stand-in .tflite: a JSON header line, then bytes
// resampled from the weights (not a FlatBuffer).
const tfliteMagic = "EDGEPIPE-STANDIN-TFLITE\n"

type tfliteHeader struct {
	Source string `json:"source_sha256"`
	// Salt is what the int8 model's errors depend on (see flipRate).
	Salt string `json:"salt"`
}

// litertConvert: litert_convert.py --model DIR --out F.tflite --mode int8
// --calibration NPZ [--samples N] [--per-tensor]
func litertConvert(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("litert_convert", flag.ContinueOnError)
	model, out, mode := fs.String("model", "", ""), fs.String("out", "", ""), fs.String("mode", "", "")
	cal := fs.String("calibration", "", "")
	samples := fs.Int("samples", 0, "")
	perTensor := fs.Bool("per-tensor", false, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *out == "" || *mode != "int8" || *cal == "" {
		return errors.New("usage (stand-in): litert_convert.py --model DIR --out F.tflite --mode int8 --calibration NPZ")
	}
	cfg, err := readConfig(*model)
	if err != nil {
		return err
	}
	sum, err := standin.CheckpointDigest(*model)
	if err != nil {
		return err
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
	weights, err := os.ReadFile(filepath.Join(*model, "model.safetensors"))
	if err != nil {
		return err
	}
	// Full-integer, the stem too (no option keeps it float): on the built-in
	// model the real converter lost 0.84 points, within the gate, so the
	// stand-in flips at onnx-int8's default rate, and more per tensor.
	h := tfliteHeader{Source: sum, Salt: fmt.Sprintf("%x tflite per_tensor=%t", c.Sum(nil)[:8], *perTensor)}
	hb, _ := json.Marshal(h)
	body := append(append([]byte(tfliteMagic), hb...), '\n')
	body = append(body, standin.Resample(weights, 0.25)...)
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(*out, body, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "stand-in LiteRT int8 conversion of %s (%s, %d classes), %d calibration images\n", *model, cfg.Architecture, cfg.NumClasses, n)
	in8 := litertreport.Tensor{Dtype: "int8", Shape: []int{1, 3, cfg.InputSize, cfg.InputSize}, Scale: 0.0186, ZeroPoint: -14}
	out8 := litertreport.Tensor{Dtype: "int8", Shape: []int{1, cfg.NumClasses}, Scale: 0.0186, ZeroPoint: -14}
	return standin.PrintJSON(stdout, litertreport.Convert{Model: *out, Mode: "int8", Bytes: int64(len(body)),
		Input: litertreport.NamedTensor{Name: "serving_default_args_0:0", Tensor: in8}, Output: litertreport.NamedTensor{Name: "StatefulPartitionedCall:0", Tensor: out8},
		Tensors: map[string]int{"int8": 180, "int32": 60}, Ops: map[string]int{"CONV_2D": 34, "FULLY_CONNECTED": 2},
		Weights: map[string]int{"int8": 54}, CalibrationSamples: n, PerChannel: !*perTensor,
		Versions: map[string]string{"litert-torch": "stand-in"}})
}

func readTFLiteHeader(path string) (tfliteHeader, error) {
	var h tfliteHeader
	f, err := os.Open(path)
	if err != nil {
		return h, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	magic := make([]byte, len(tfliteMagic))
	if _, err := io.ReadFull(r, magic); err != nil || !bytes.Equal(magic, []byte(tfliteMagic)) {
		return h, fmt.Errorf("%s: the LiteRT interpreter refused it (not a stand-in .tflite)", path)
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(line, &h); err != nil || h.Source == "" {
		return h, fmt.Errorf("%s: a stand-in .tflite with a broken header", path)
	}
	return h, nil
}

// litertValidate: litert_validate.py --model F.tflite --set NPZ --config DIR
// [--reference REF.npy] [--predictions OUT.npy] [--threads N]
func litertValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("litert_validate", flag.ContinueOnError)
	model, set, cfgDir := fs.String("model", "", ""), fs.String("set", "", ""), fs.String("config", "", "")
	ref, preds := fs.String("reference", "", ""), fs.String("predictions", "", "")
	fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *set == "" || *cfgDir == "" {
		return errors.New("usage (stand-in): litert_validate.py --model F.tflite --set NPZ --config DIR")
	}
	h, err := readTFLiteHeader(*model)
	if err != nil {
		return err
	}
	cfg, err := readConfig(*cfgDir)
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
	if *preds != "" {
		if err := writeInt64NPY(*preds, pred); err != nil {
			return err
		}
	}
	top1 := float64(correct) / float64(len(pred))
	in8 := litertreport.Tensor{Dtype: "int8", Shape: []int{1, 3, cfg.InputSize, cfg.InputSize}, Scale: 0.0186, ZeroPoint: -14}
	out8 := litertreport.Tensor{Dtype: "int8", Shape: []int{1, cfg.NumClasses}, Scale: 0.0186, ZeroPoint: -14}
	res := litertreport.Validate{Model: *model, Samples: len(pred), Input: in8, Output: out8,
		Top1: &top1, Correct: &correct, Labelled: !s.Unlabelled, AIEdgeLiteRT: "stand-in"}
	if s.Unlabelled {
		res.Top1, res.Correct = nil, nil
	}
	if *ref != "" {
		a, err := agreement(*ref, pred)
		if err != nil {
			return err
		}
		res.Reference = &litertreport.Reference{Agreement: a}
		if !s.Unlabelled {
			// The reference's own top-1, from its predictions, as the real
			// script computes it.
			r, err := readInt64NPY(*ref)
			if err != nil {
				return err
			}
			right := 0
			for i, label := range s.Labels {
				if r[i] == label {
					right++
				}
			}
			refTop1 := float64(right) / float64(len(r))
			drop := refTop1 - top1
			res.Reference.Top1, res.Reference.Drop = &refTop1, &drop
		}
	}
	return json.NewEncoder(stdout).Encode(res)
}
