// Package standin holds the QNN family's stand-ins: the QDQ flow, Qualcomm
// AI Hub's client and the QNN SDK's tools (see internal/standin).
package standin

import (
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
	"github.com/edgepipe/edgepipe/pipelines/qnn/report"
)

func init() {
	standin.Tools["qnn_qdq.py"] = qnnQDQ
	standin.Tools["qnn_ai_hub.py"] = qnnAIHub
	standin.Tools["qnn-onnx-converter"] = qnnConverter
	standin.Tools["qnn-model-lib-generator"] = qnnModelLib
	standin.Tools["qnn-context-binary-generator"] = qnnContextBinary
	standin.Tools["qnn_htp.py"] = qnnHTP
}

// qnnHTP: qnn_htp.py --qdq F --hf DIR --text T --out DIR --ctx N [--chunks K]
// --soc-model M --htp-arch A [--scores-out DIR] [--baseline-scores DIR]. It compiles nothing and simulates nothing: it
// checks the QDQ model was made from --hf at --ctx tokens, writes an
// EPContext stand-in and a context-binary stand-in derived from it and the
// SoC, and scores the text as the other stand-ins do.
func qnnHTP(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("qnn_htp", flag.ContinueOnError)
	model := fs.String("qdq", "", "")
	hf := fs.String("hf", "", "")
	textFile := fs.String("text", "", "")
	out := fs.String("out", "", "")
	nctx := fs.Int("ctx", 0, "")
	chunks := fs.Int("chunks", -1, "")
	soc := fs.Int("soc-model", 0, "")
	arch := fs.Int("htp-arch", 0, "")
	scores := standin.AddScoreFlags(fs)
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *soc <= 0 || *arch <= 0 {
		return errors.New("--soc-model and --htp-arch are required")
	}
	h, payload, err := onnxstandin.ReadONNX(*model)
	if err != nil {
		return err
	}
	if h.Kind != "qdq" {
		return fmt.Errorf("%s is not a QDQ model", *model)
	}
	src, err := standin.CheckpointDigest(*hf)
	if err != nil {
		return err
	}
	if src != h.Source {
		return fmt.Errorf("%s was not converted from %s", *model, *hf)
	}
	if h.SeqLen != *nctx {
		return fmt.Errorf("the graph takes exactly %d tokens (static shape), but --ctx is %d", h.SeqLen, *nctx)
	}
	ppl, tokens, n, err := standin.EvalChunks(*textFile, *nctx, *chunks)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "stand-in: nothing was compiled by QNN's HTP backend and nothing ran on its simulator\n")
	bin := append([]byte(fmt.Sprintf("QNN context binary stand-in, soc_model %d, htp_arch v%d\n", *soc, *arch)), standin.Resample(payload, 0.5)...)
	if err := os.WriteFile(filepath.Join(*out, "model_ctx_qnn.bin"), bin, 0o644); err != nil {
		return err
	}
	h.Kind = "epcontext"
	if err := onnxstandin.WriteONNX(filepath.Join(*out, "model_ctx.onnx"), h, nil); err != nil {
		return err
	}
	drift := standin.Drift(h.Bits)
	ppl += drift
	scored := n * (*nctx - 1 - *nctx/2)
	// The context binary scores: each compiled model's its own.
	kl, baseTop1, err := scores.Scores(ppl, scored, bin)
	if err != nil {
		return err
	}
	maxAbs, meanAbs, top1, positions := 40*drift, 4*drift, 1-drift, *nctx
	return standin.PrintJSON(stdout, report.HTP{Model: "model_ctx.onnx", ContextBinary: "model_ctx_qnn.bin",
		QNNVersion: "2.51.0", ORTQNN: "2.7.0", ORT: "1.31.1", SoCModel: *soc, HTPArch: *arch, CompileS: 0.1,
		Gate: &report.Gate{PPL: ppl, Chunks: n, Ctx: *nctx, Scored: scored, Tokens: tokens,
			LoadS: 0.01, SecondsPerChunk: 0.01, RanOn: "stand-in", Providers: []string{"QNNExecutionProvider (stand-in)"},
			LogitsCheck:  report.LogitsCheck{MaxAbs: &maxAbs, MeanAbs: &meanAbs, Top1: &top1, Positions: &positions},
			KLDivergence: kl, BaselineTop1: baseTop1}})
}

var qnnBits = map[string]float64{"uint8": 8, "int8": 8, "uint16": 16, "int16": 16, "int4": 4, "uint4": 4}

// qnnQDQ: qnn_qdq.py --onnx F --tokenizer DIR --calibration T --out DIR --seq-len N
// [--samples S] [--weight-type T] [--activation-type T]
func qnnQDQ(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("qnn_qdq", flag.ContinueOnError)
	model := fs.String("onnx", "", "")
	tok := fs.String("tokenizer", "", "")
	calib := fs.String("calibration", "", "")
	out := fs.String("out", "", "")
	seq := fs.Int("seq-len", 0, "")
	samples := fs.Int("samples", 4, "")
	wt := fs.String("weight-type", "uint8", "")
	at := fs.String("activation-type", "uint16", "")
	static := fs.Bool("static-inputs", false, "")
	perChannel := fs.Bool("per-channel", false, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	bits, ok := qnnBits[*wt]
	if _, okA := qnnBits[*at]; !ok || !okA {
		return fmt.Errorf("unknown --weight-type %q or --activation-type %q", *wt, *at)
	}
	h, payload, err := onnxstandin.ReadONNX(*model)
	if err != nil {
		return err
	}
	if h.KVLayers > 0 {
		return errors.New("the graph has KV-cache inputs; export it without them (onnx_export.py --no-past)")
	}
	text, err := os.ReadFile(*calib)
	if err != nil {
		return err
	}
	if _, tokens := standin.TextPerplexity(text); tokens < *samples**seq {
		return fmt.Errorf("the calibration text has %d tokens, fewer than --samples %d x --seq-len %d", tokens, *samples, *seq)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	h.Kind, h.Bits, h.SeqLen, h.Weights = "qdq", bits, *seq, *wt+"/"+*at
	if err := onnxstandin.WriteONNX(filepath.Join(*out, "model.onnx"), h, standin.Resample(payload, bits/32)); err != nil {
		return err
	}
	if err := standin.CopyCheckpointFiles(*tok, *out); err != nil {
		return err
	}
	folded := []string{}
	floatNodes, rms := 5, 0
	if *static {
		folded = []string{"attention_mask", "position_ids"}
		floatNodes, rms = 0, 2*max(h.KVLayers, 1)+1
	}
	convs := 0
	if *perChannel {
		convs = 7*max(h.KVLayers, 1) + 1
	}
	var size int64
	ents, err := os.ReadDir(*out)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if info, err := e.Info(); err == nil {
			size += info.Size()
		}
	}
	return standin.PrintJSON(stdout, report.QDQ{Model: "model.onnx", SeqLen: *seq, Samples: *samples,
		WeightType: *wt, ActivationType: *at, QuantizeLinear: 100, DequantizeLinear: 300, Preprocessed: true,
		MaskConstants: max(h.KVLayers, 1), FloatNodes: floatNodes, StaticInputs: folded, PerChannelConvs: convs,
		RMSNorms: rms, Bytes: size})
}

// qnnAIHub: qnn_ai_hub.py --onnx F --device NAME --seq-len N --out FILE [--timeout S]
func qnnAIHub(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("qnn_ai_hub", flag.ContinueOnError)
	model := fs.String("onnx", "", "")
	device := fs.String("device", "", "")
	fs.Int("seq-len", 0, "")
	out := fs.String("out", "", "")
	fs.Int("timeout", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	h, payload, err := onnxstandin.ReadONNX(*model)
	if err != nil {
		return err
	}
	if h.Kind != "qdq" {
		return fmt.Errorf("%s is not a QDQ model", *model)
	}
	sum, _ := standin.DigestFiles([]byte(*device), *model)
	fmt.Fprintf(stderr, "stand-in: no job was submitted to Qualcomm AI Hub\n")
	if err := os.WriteFile(*out, append([]byte("QNN context binary stand-in for "+*device+"\n"), standin.Resample(payload, 0.5)...), 0o644); err != nil {
		return err
	}
	return standin.PrintJSON(stdout, report.AIHub{JobID: "standin-" + sum[:8], TargetRuntime: "qnn_context_binary", Device: *device,
		Status: "SUCCESS"})
}

// qnnConverter: qnn-onnx-converter --input_network F --output_path model.cpp
// (the real converter writes model.cpp and model.bin beside it).
func qnnConverter(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("qnn-onnx-converter", flag.ContinueOnError)
	in := fs.String("input_network", "", "")
	out := fs.String("output_path", "", "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	h, payload, err := onnxstandin.ReadONNX(*in)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, []byte(fmt.Sprintf("// stand-in QNN model for %s (%s)\n", h.Source, h.Weights)), 0o644); err != nil {
		return err
	}
	return os.WriteFile(strings.TrimSuffix(*out, ".cpp")+".bin", payload, 0o644)
}

// qnnModelLib: qnn-model-lib-generator -c model.cpp -b model.bin -o LIBS -t TARGET
func qnnModelLib(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("qnn-model-lib-generator", flag.ContinueOnError)
	cpp := fs.String("c", "", "")
	bin := fs.String("b", "", "")
	out := fs.String("o", "", "")
	target := fs.String("t", "", "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	sum, err := standin.DigestFiles(nil, *cpp, *bin)
	if err != nil {
		return err
	}
	dir := filepath.Join(*out, *target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "libmodel.so"), []byte("stand-in model library "+sum+"\n"), 0o644)
}

// qnnContextBinary: qnn-context-binary-generator --backend LIB --model SO
// --binary_file NAME --output_dir DIR [--config_file CFG]
func qnnContextBinary(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("qnn-context-binary-generator", flag.ContinueOnError)
	backend := fs.String("backend", "", "")
	model := fs.String("model", "", "")
	name := fs.String("binary_file", "", "")
	out := fs.String("output_dir", "", "")
	cfgFile := fs.String("config_file", "", "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	var ext struct {
		BackendExtensions struct {
			ConfigFilePath string `json:"config_file_path"`
		} `json:"backend_extensions"`
	}
	b, err := os.ReadFile(*cfgFile)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &ext); err != nil {
		return fmt.Errorf("%s: %w", *cfgFile, err)
	}
	sum, err := standin.DigestFiles(nil, *backend, *model, *cfgFile, ext.BackendExtensions.ConfigFilePath)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*out, *name+".bin"), []byte("stand-in QNN context binary "+sum+"\n"), 0o644)
}
