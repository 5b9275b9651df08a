package standin

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/standin"
	onnxstandin "github.com/edgepipe/edgepipe/pipelines/onnx/standin"
	"github.com/edgepipe/edgepipe/pipelines/vision/report"
)

func init() {
	standin.Tools["vision_qnn.py"] = visionQNN
}

// Kinds of the stand-in ONNX files vision_qnn.py writes.
const (
	qnnQDQKind = "qnn-qdq-int8"
	qnnCtxKind = "qnn-epcontext"
)

// qnnBinaryHeader starts a stand-in context binary: the SoC it was
// compiled for, then bytes resampled from the QDQ model.
type qnnBinaryHeader struct {
	SoCModel int    `json:"soc_model"`
	HTPArch  int    `json:"htp_arch"`
	Source   string `json:"source_sha256"`
	Salt     string `json:"salt"`
}

// visionQNN: vision_qnn.py quantize|compile|eval ... (see pipelines/vision/python/vision_qnn.py).
// Nothing is quantized, compiled by QNN or run on its simulator: each
// subcommand checks what it reads was made by the step before it (the
// fp32 export, the QDQ model, a binary for the same SoC) and derives its
// output from it.
func visionQNN(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage (stand-in): vision_qnn.py quantize|compile|eval ARGS")
	}
	fmt.Fprintf(stderr, "stand-in: nothing was quantized, compiled by QNN's HTP backend or run on its simulator\n")
	switch args[0] {
	case "quantize":
		return qnnQuantize(args[1:], stdout)
	case "compile":
		return qnnCompile(args[1:], stdout)
	case "eval":
		return qnnEval(args[1:], stdout)
	}
	return fmt.Errorf("vision_qnn.py: unknown subcommand %q", args[0])
}

// qnnQuantize: quantize --in F --calibration NPZ --out DIR [--per-tensor] [--samples N]
func qnnQuantize(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("vision_qnn quantize", flag.ContinueOnError)
	in, cal, out := fs.String("in", "", ""), fs.String("calibration", "", ""), fs.String("out", "", "")
	perTensor := fs.Bool("per-tensor", false, "")
	samples := fs.Int("samples", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	h, payload, err := onnxstandin.ReadONNX(*in)
	if err != nil {
		return err
	}
	if h.Kind != "fp32" {
		return fmt.Errorf("%s is not the fp32 export (%s)", *in, h.Kind)
	}
	cfg, err := readConfig(filepath.Dir(*in))
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
	// Every layer int8, the stem too, like tflite-int8: the same flip
	// rate (see flipRate), more per tensor.
	h.Kind, h.Bits = qnnQDQKind, 8
	h.Weights = fmt.Sprintf("%x qnn per_tensor=%t", c.Sum(nil)[:8], *perTensor)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := onnxstandin.WriteONNX(filepath.Join(*out, "model.onnx"), h, standin.Resample(payload, 0.25)); err != nil {
		return err
	}
	if err := standin.CopyCheckpointFiles(filepath.Dir(*in), *out); err != nil {
		return err
	}
	perChannel := 54
	if *perTensor {
		perChannel = 0
	}
	return standin.PrintJSON(stdout, report.QNN{Quantize: &report.QNNQuantize{Model: "model.onnx", Input: "pixel_values",
		Shape: []int{1, 3, cfg.InputSize, cfg.InputSize}, FixedDims: []string{"batch"}, QuantizeLinear: 128,
		DequantizeLinear: 236, Int8Initializers: 235, FloatConvGemm: 0, PerChannelWeights: perChannel,
		CalibrationImages: n, WeightType: "int8", ActivationType: "uint8", PerChannel: !*perTensor, Bytes: int64(len(payload) / 4)}})
}

// qnnCompile: compile --qdq F --out DIR --soc-model M --htp-arch A
func qnnCompile(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("vision_qnn compile", flag.ContinueOnError)
	qdq, out := fs.String("qdq", "", ""), fs.String("out", "", "")
	soc, arch := fs.Int("soc-model", 0, ""), fs.Int("htp-arch", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *soc <= 0 || *arch <= 0 {
		return errors.New("--soc-model and --htp-arch are required")
	}
	h, payload, err := onnxstandin.ReadONNX(*qdq)
	if err != nil {
		return err
	}
	if h.Kind != qnnQDQKind {
		return fmt.Errorf("%s is not a QDQ model from vision_qnn.py quantize (%s)", *qdq, h.Kind)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	hb, _ := json.Marshal(qnnBinaryHeader{SoCModel: *soc, HTPArch: *arch, Source: h.Source, Salt: h.Weights})
	bin := append(append([]byte("QNN context binary stand-in\n"), hb...), '\n')
	bin = append(bin, standin.Resample(payload, 1)...)
	if err := os.WriteFile(filepath.Join(*out, "model_ctx_qnn.bin"), bin, 0o644); err != nil {
		return err
	}
	h.Kind = qnnCtxKind
	if err := onnxstandin.WriteONNX(filepath.Join(*out, "model_ctx.onnx"), h, nil); err != nil {
		return err
	}
	if err := standin.CopyCheckpointFiles(filepath.Dir(*qdq), *out); err != nil {
		return err
	}
	return standin.PrintJSON(stdout, report.QNN{Compile: &report.QNNCompile{Model: "model_ctx.onnx", ContextBinary: "model_ctx_qnn.bin",
		CompileS: 0.1, ContextBinaryBytes: int64(len(bin)), EPContextNodes: 1, QNNVersions: qnnVersions(*soc, *arch)}})
}

// qnnVersions are the versions the stand-in reports: the qnn lock's.
func qnnVersions(soc, arch int) report.QNNVersions {
	return report.QNNVersions{QNNVersion: "2.51.0", ONNXRuntimeQNN: "2.7.0", ONNXRuntime: "1.31.1", SoCModel: soc, HTPArch: arch}
}

// readQNNBinary reads a stand-in context binary's header.
func readQNNBinary(path string) (qnnBinaryHeader, error) {
	var h qnnBinaryHeader
	f, err := os.Open(path)
	if err != nil {
		return h, fmt.Errorf("the EPContext model's context binary: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	if magic, err := r.ReadString('\n'); err != nil || magic != "QNN context binary stand-in\n" {
		return h, fmt.Errorf("%s: QNN refused it (not a stand-in context binary)", path)
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(line, &h); err != nil || h.Source == "" {
		return h, fmt.Errorf("%s: a stand-in context binary with a broken header", path)
	}
	return h, nil
}

// qnnEval: eval --model F --set NPZ --config DIR --predictions OUT [--reference REF]
// [--images N] --soc-model M --htp-arch A
func qnnEval(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("vision_qnn eval", flag.ContinueOnError)
	model, set, cfgDir := fs.String("model", "", ""), fs.String("set", "", ""), fs.String("config", "", "")
	preds, ref := fs.String("predictions", "", ""), fs.String("reference", "", "")
	images := fs.Int("images", 0, "")
	soc, arch := fs.Int("soc-model", 0, ""), fs.Int("htp-arch", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *set == "" || *cfgDir == "" || *preds == "" {
		return errors.New("usage (stand-in): vision_qnn.py eval --model F --set NPZ --config DIR --predictions OUT")
	}
	h, _, err := onnxstandin.ReadONNX(*model)
	if err != nil {
		return err
	}
	if h.Kind != qnnCtxKind {
		return fmt.Errorf("%s is not an EPContext model from vision_qnn.py compile (%s)", *model, h.Kind)
	}
	bin, err := readQNNBinary(filepath.Join(filepath.Dir(*model), "model_ctx_qnn.bin"))
	if err != nil {
		return err
	}
	// A binary compiled for another Hexagon does not load.
	if bin.SoCModel != *soc || bin.HTPArch != *arch || bin.Source != h.Source {
		return fmt.Errorf("the context binary was compiled for soc_model %d, htp_arch v%d (source %s), not soc_model %d, htp_arch v%d",
			bin.SoCModel, bin.HTPArch, bin.Source, *soc, *arch)
	}
	cfg, err := readConfig(*cfgDir)
	if err != nil {
		return err
	}
	s, err := readImageSet(*set)
	if err != nil {
		return err
	}
	total := len(s.Labels)
	if *images > 0 && *images < total {
		s.Labels = s.Labels[:*images]
	}
	pred, correct, err := classify(s, *set, bin.Source, bin.Salt, cfg.NumClasses)
	if err != nil {
		return err
	}
	if err := writeInt64NPY(*preds, pred); err != nil {
		return err
	}
	e, err := evalReport(s, pred, correct, "QNN 2.51.0 HTP backend (stand-in)", "")
	if err != nil {
		return err
	}
	res := report.QNNEval{Eval: e, SetImages: total, Providers: []string{"QNNExecutionProvider", "CPUExecutionProvider"},
		QNNVersions: qnnVersions(*soc, *arch)}
	if *ref != "" {
		r, err := readInt64NPY(*ref)
		if err != nil {
			return err
		}
		if len(r) != total {
			return fmt.Errorf("%s: %d reference predictions for %d images", *ref, len(r), total)
		}
		same, refCorrect := 0, 0
		for i, p := range pred {
			if r[i] == p {
				same++
			}
			if r[i] == s.Labels[i] {
				refCorrect++
			}
		}
		a := float64(same) / float64(len(pred))
		res.Agreement = &a
		if !s.Unlabelled {
			top1 := float64(refCorrect) / float64(len(pred))
			res.ReferenceTop1 = &top1
		}
	}
	return standin.PrintJSON(stdout, report.QNN{Eval: &res})
}
