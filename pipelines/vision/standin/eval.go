package standin

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/standin"
	onnxstandin "github.com/edgepipe/edgepipe/pipelines/onnx/standin"
)

// eval: vision_eval.py --set NPZ --predictions OUT.npy (--torch DIR | --onnx F) [--reference REF.npy]
func eval(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vision_eval", flag.ContinueOnError)
	set, preds := fs.String("set", "", ""), fs.String("predictions", "", "")
	torch, onnx, ref := fs.String("torch", "", ""), fs.String("onnx", "", ""), fs.String("reference", "", "")
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
		if h.Kind == "int8" {
			salt = h.Weights
		}
	}
	pred := make([]int64, len(s.Labels))
	correct := 0
	for i, label := range s.Labels {
		if s.Unlabelled {
			// No label to be right about: the "true" class is the image's own
			// (its bytes pick it), so the fp32 model still predicts the same
			// class as the reference and an int8 one sometimes another.
			h := sha256.Sum256(s.image(i))
			label = int64(binary.BigEndian.Uint16(h[:2])) % int64(cfg.NumClasses)
		} else if label < 0 || int(label) >= cfg.NumClasses {
			return fmt.Errorf("%s: label %d of image %d is not one of the model's %d classes", *set, label, i, cfg.NumClasses)
		}
		pred[i] = predict(source, salt, s.image(i), label, cfg.NumClasses)
		if pred[i] == label {
			correct++
		}
	}
	if err := writeInt64NPY(*preds, pred); err != nil {
		return err
	}
	res := map[string]any{"top1": float64(correct) / float64(len(pred)), "correct": correct, "images": len(pred), "runtime": runtime}
	if s.Unlabelled {
		res["top1"], res["correct"], res["labelled"] = nil, 0, false
	}
	if *ref != "" {
		r, err := readInt64NPY(*ref)
		if err != nil {
			return err
		}
		if len(r) != len(pred) {
			return fmt.Errorf("%s: %d reference predictions for %d images", *ref, len(r), len(pred))
		}
		same := 0
		for i := range r {
			if r[i] == pred[i] {
				same++
			}
		}
		res["agreement"] = float64(same) / float64(len(r))
	}
	return json.NewEncoder(stdout).Encode(res)
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
