package standin

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/standin"
	onnxstandin "github.com/edgepipe/edgepipe/pipelines/onnx/standin"
	"github.com/edgepipe/edgepipe/pipelines/vision/report"
)

// eval: vision_eval.py --set NPZ --predictions OUT.npy (--torch DIR | --onnx F) [--reference REF.npy]
func eval(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vision_eval", flag.ContinueOnError)
	set, preds := fs.String("set", "", ""), fs.String("predictions", "", "")
	torch, onnx, ref := fs.String("torch", "", ""), fs.String("onnx", "", ""), fs.String("reference", "", "")
	simulate := fs.Bool("simulate-qdq", false, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *set == "" || *preds == "" || (*torch == "") == (*onnx == "") {
		return errors.New("usage: vision_eval.py --set NPZ --predictions OUT.npy (--torch DIR | --onnx F) [--reference REF.npy]")
	}
	s, err := readImageSet(*set)
	if err != nil {
		return err
	}
	var source, salt, runtime string
	var cfg classifierConfig
	if *torch != "" {
		if cfg, err = readConfig(*torch); err != nil {
			return err
		}
		if source, err = standin.CheckpointDigest(*torch); err != nil {
			return err
		}
		runtime = "torch (stand-in)"
	} else {
		if cfg, err = readConfig(filepath.Dir(*onnx)); err != nil {
			return err
		}
		h, _, err := onnxstandin.ReadONNX(*onnx)
		if err != nil {
			return err
		}
		source, runtime = h.Source, "onnxruntime (stand-in) CPUExecutionProvider"
		if *simulate {
			runtime += " (optimizations off: Q/DQ computed as written)"
		}
		if h.Kind == "int8" {
			salt = h.Weights
		}
	}
	pred, correct, err := classify(s, *set, source, salt, cfg.NumClasses)
	if err != nil {
		return err
	}
	if err := writeInt64NPY(*preds, pred); err != nil {
		return err
	}
	res, err := evalReport(s, pred, correct, runtime, *ref)
	if err != nil {
		return err
	}
	return standin.PrintJSON(stdout, res)
}

// evalReport is what every scorer reports of pred: top-1 (none on an
// unlabelled set) and, given the reference's predictions, agreement.
func evalReport(s *imageSet, pred []int64, correct int, runtime, ref string) (report.Eval, error) {
	res := report.Eval{Correct: correct, Images: len(pred), Runtime: runtime, Labelled: !s.Unlabelled}
	if s.Unlabelled {
		res.Correct = 0
	} else {
		top1 := float64(correct) / float64(len(pred))
		res.Top1 = &top1
	}
	if ref != "" {
		a, err := agreement(ref, pred)
		if err != nil {
			return res, err
		}
		res.Agreement = &a
	}
	return res, nil
}

// classify predicts every image of s (read from path) with the stand-in
// classifier, returning the predictions and how many match their labels.
// An unlabelled set has no label to be right about: each image's "true"
// class is its own (its bytes pick it), so the fp32 model still predicts
// the reference's class and an int8 one sometimes another.
func classify(s *imageSet, path, source, salt string, classes int) ([]int64, int, error) {
	pred := make([]int64, len(s.Labels))
	correct := 0
	for i, label := range s.Labels {
		if s.Unlabelled {
			h := sha256.Sum256(s.image(i))
			label = int64(binary.BigEndian.Uint16(h[:2])) % int64(classes)
		} else if label < 0 || int(label) >= classes {
			return nil, 0, fmt.Errorf("%s: label %d of image %d is not one of the model's %d classes", path, label, i, classes)
		}
		pred[i] = predict(source, salt, s.image(i), label, classes)
		if pred[i] == label {
			correct++
		}
	}
	return pred, correct, nil
}

// agreement is the share of pred equal to the reference predictions in
// refPath (.npy).
func agreement(refPath string, pred []int64) (float64, error) {
	r, err := readInt64NPY(refPath)
	if err != nil {
		return 0, err
	}
	if len(r) != len(pred) {
		return 0, fmt.Errorf("%s: %d reference predictions for %d images", refPath, len(r), len(pred))
	}
	same := 0
	for i := range r {
		if r[i] == pred[i] {
			same++
		}
	}
	return float64(same) / float64(len(r)), nil
}

// predict is the stand-in classifier: right about 98% of the time, wrong
// where the model's digest and the image's bytes say so; an int8 model
// (salt set) is wrong on more images, at flipRate.
func predict(source, salt string, image []byte, label int64, classes int) int64 {
	h := sha256.Sum256(append([]byte(source+"\x00"), image...))
	wrong := h[0] < 5
	if salt != "" {
		q := sha256.Sum256(append([]byte(source+"\x00"+salt+"\x00"), image...))
		wrong = wrong || int(q[0]) < flipRate(salt)
	}
	if !wrong {
		return label
	}
	return (label + 1 + int64(h[1])%int64(classes-1)) % int64(classes)
}
