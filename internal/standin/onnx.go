package standin

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func init() {
	Tools["onnx_export.py"] = onnxExport
	Tools["onnx_quantize.py"] = onnxQuantize
	Tools["onnx_validate.py"] = onnxValidate
	Tools["qnn_qdq.py"] = qnnQDQ
	Tools["qnn_ai_hub.py"] = qnnAIHub
	Tools["qnn-onnx-converter"] = qnnConverter
	Tools["qnn-model-lib-generator"] = qnnModelLib
	Tools["qnn-context-binary-generator"] = qnnContextBinary
}

// onnxHeader is the stand-in ONNX file's metadata. The file starts with
// 0x08 like a serialized ModelProto (its ir_version field), then the
// header's length (uint32) and JSON, then a payload derived from the
// source weights.
type onnxHeader struct {
	StandIn    bool    `json:"standin"`
	Kind       string  `json:"kind"` // fp32 | int4 | qdq
	Bits       float64 `json:"bits"`
	Opset      int     `json:"opset"`
	KVLayers   int     `json:"kv_layers"`
	HiddenSize int     `json:"hidden_size"`
	BlockSize  int     `json:"block_size,omitempty"`
	SeqLen     int     `json:"seq_len,omitempty"`
	Weights    string  `json:"weights,omitempty"`
	Source     string  `json:"source_sha256"`
}

func writeONNX(path string, h onnxHeader, payload []byte) error {
	meta, err := json.Marshal(h)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.WriteByte(0x08)
	binary.Write(&buf, binary.LittleEndian, uint32(len(meta)))
	buf.Write(meta)
	buf.Write(payload)
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func readONNX(path string) (onnxHeader, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return onnxHeader{}, nil, err
	}
	if len(b) < 5 || b[0] != 0x08 {
		return onnxHeader{}, nil, fmt.Errorf("%s is not an ONNX model", path)
	}
	n := binary.LittleEndian.Uint32(b[1:5])
	if int(n) > len(b)-5 {
		return onnxHeader{}, nil, fmt.Errorf("%s: truncated header", path)
	}
	var h onnxHeader
	if err := json.Unmarshal(b[5:5+n], &h); err != nil {
		return onnxHeader{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, b[5+n:], nil
}

// parseFlags parses args with fs, allowing flags after positionals.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	return fs.Parse(args)
}

// copyCheckpointFiles copies config and tokenizer files (everything but
// weights) from a checkpoint or export folder, as optimum does.
func copyCheckpointFiles(from, to string) error {
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || strings.HasSuffix(n, ".safetensors") || strings.HasSuffix(n, ".onnx") || n == "result.json" || n == "step.log" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, n))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, n), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func printJSON(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// onnxExport: onnx_export.py --model DIR --out DIR [--opset N] [--no-past]
func onnxExport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("onnx_export", flag.ContinueOnError)
	model := fs.String("model", "", "")
	out := fs.String("out", "", "")
	opset := fs.Int("opset", 18, "")
	noPast := fs.Bool("no-past", false, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *out == "" {
		return errors.New("usage: onnx_export.py --model DIR --out DIR [--opset N] [--no-past]")
	}
	if *opset < 17 {
		return fmt.Errorf("--opset must be 17 or newer")
	}
	sum, err := checkpointDigest(*model)
	if err != nil {
		return err
	}
	var cfg struct {
		HiddenSize int `json:"hidden_size"`
		Layers     int `json:"num_hidden_layers"`
	}
	b, _ := os.ReadFile(filepath.Join(*model, "config.json"))
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	shards, _ := filepath.Glob(filepath.Join(*model, "*.safetensors"))
	var payload []byte
	for _, s := range shards {
		p, err := os.ReadFile(s)
		if err != nil {
			return err
		}
		payload = append(payload, p...)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	h := onnxHeader{StandIn: true, Kind: "fp32", Bits: 32, Opset: *opset, HiddenSize: cfg.HiddenSize, Source: sum}
	if !*noPast {
		h.KVLayers = max(cfg.Layers, 1)
	}
	if err := writeONNX(filepath.Join(*out, "model.onnx"), h, payload); err != nil {
		return err
	}
	if err := copyCheckpointFiles(*model, *out); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "stand-in export of %s (opset %d)\n", *model, *opset)
	return printJSON(stdout, map[string]any{"model": "model.onnx", "opset": *opset,
		"inputs": []string{"input_ids", "attention_mask", "position_ids"}, "outputs": []string{"logits"},
		"kv_layers": h.KVLayers, "kv_cache": !*noPast})
}

// onnxQuantize: onnx_quantize.py --in F --out DIR [--block-size B] [--asymmetric]
func onnxQuantize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("onnx_quantize", flag.ContinueOnError)
	in := fs.String("in", "", "")
	out := fs.String("out", "", "")
	bs := fs.Int("block-size", 32, "")
	asym := fs.Bool("asymmetric", false, "")
	keepHead := fs.Bool("keep-lm-head", false, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *bs < 16 || *bs&(*bs-1) != 0 {
		return fmt.Errorf("--block-size %d is not a power of two of at least 16", *bs)
	}
	h, payload, err := readONNX(*in)
	if err != nil {
		return err
	}
	if h.Kind != "fp32" {
		return fmt.Errorf("%s is already quantized (%s)", *in, h.Kind)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	var padded []int
	if h.HiddenSize%*bs != 0 {
		padded = []int{h.HiddenSize}
	}
	h.Kind, h.Bits, h.BlockSize = "int4", 4+16.0/float64(*bs), *bs
	if *asym {
		h.Bits += 4.0 / float64(*bs)
	}
	// The output projection is about a tenth of a small model's weights.
	var kept []string
	nbits := 7*max(h.KVLayers, 1) + 1
	if *keepHead {
		h.Bits += 0.1 * (32 - h.Bits)
		kept, nbits = []string{"/lm_head/MatMul"}, nbits-1
	}
	if err := writeONNX(filepath.Join(*out, "model.onnx"), h, resample(payload, h.Bits/32)); err != nil {
		return err
	}
	if err := copyCheckpointFiles(filepath.Dir(*in), *out); err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"model": "model.onnx", "block_size": *bs, "symmetric": !*asym,
		"matmulnbits": nbits, "matmul_float": len(kept), "kept_fp32": kept, "padded_k": padded})
}

// logitDiff is the stand-in's max |logit difference| against PyTorch:
// kernel rounding for fp32, growing as weights lose bits.
func logitDiff(bits float64) float64 {
	if bits >= 32 {
		return 1e-4
	}
	return 40 * drift(bits)
}

// onnxValidate: onnx_validate.py --onnx F --hf DIR --text T [--ctx N] [--chunks K]
func onnxValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("onnx_validate", flag.ContinueOnError)
	model := fs.String("onnx", "", "")
	hf := fs.String("hf", "", "")
	textFile := fs.String("text", "", "")
	nctx := fs.Int("ctx", 512, "")
	chunks := fs.Int("chunks", -1, "")
	fs.Int("threads", 0, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	h, _, err := readONNX(*model)
	if err != nil {
		return err
	}
	src, err := checkpointDigest(*hf)
	if err != nil {
		return err
	}
	if src != h.Source {
		return fmt.Errorf("%s was not converted from %s", *model, *hf)
	}
	if h.SeqLen > 0 && h.SeqLen != *nctx {
		return fmt.Errorf("the graph takes exactly %d tokens (static shape), but --ctx is %d", h.SeqLen, *nctx)
	}
	ppl, tokens, n, err := evalChunks(*textFile, *nctx, *chunks)
	if err != nil {
		return err
	}
	d := logitDiff(h.Bits)
	return printJSON(stdout, map[string]any{"ppl": ppl + drift(h.Bits), "chunks": n, "ctx": *nctx,
		"scored": n * (*nctx - 1 - *nctx/2), "tokens": tokens, "max_abs_logit_diff": d, "mean_abs_logit_diff": d / 10,
		"top1_agreement": 1 - drift(h.Bits), "logit_positions": *nctx, "providers": []string{"CPUExecutionProvider"}})
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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	bits, ok := qnnBits[*wt]
	if _, okA := qnnBits[*at]; !ok || !okA {
		return fmt.Errorf("unknown --weight-type %q or --activation-type %q", *wt, *at)
	}
	h, payload, err := readONNX(*model)
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
	if _, tokens := textPerplexity(text); tokens < *samples**seq {
		return fmt.Errorf("the calibration text has %d tokens, fewer than --samples %d x --seq-len %d", tokens, *samples, *seq)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	h.Kind, h.Bits, h.SeqLen, h.Weights = "qdq", bits, *seq, *wt+"/"+*at
	if err := writeONNX(filepath.Join(*out, "model.onnx"), h, resample(payload, bits/32)); err != nil {
		return err
	}
	if err := copyCheckpointFiles(*tok, *out); err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"model": "model.onnx", "seq_len": *seq, "samples": *samples,
		"weight_type": *wt, "activation_type": *at, "quantize_linear": 100, "dequantize_linear": 300, "preprocessed": true, "mask_constants": max(h.KVLayers, 1), "float_nodes": 5})
}

// qnnAIHub: qnn_ai_hub.py --onnx F --device NAME --seq-len N --out FILE [--timeout S]
func qnnAIHub(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("qnn_ai_hub", flag.ContinueOnError)
	model := fs.String("onnx", "", "")
	device := fs.String("device", "", "")
	fs.Int("seq-len", 0, "")
	out := fs.String("out", "", "")
	fs.Int("timeout", 0, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	h, payload, err := readONNX(*model)
	if err != nil {
		return err
	}
	if h.Kind != "qdq" {
		return fmt.Errorf("%s is not a QDQ model", *model)
	}
	sum, _ := digestFiles([]byte(*device), *model)
	fmt.Fprintf(stderr, "stand-in: no job was submitted to Qualcomm AI Hub\n")
	if err := os.WriteFile(*out, append([]byte("QNN context binary stand-in for "+*device+"\n"), resample(payload, 0.5)...), 0o644); err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"job_id": "standin-" + sum[:8], "target_runtime": "qnn_context_binary"})
}

// qnnConverter: qnn-onnx-converter --input_network F --output_path model.cpp
// (the real converter writes model.cpp and model.bin beside it).
func qnnConverter(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("qnn-onnx-converter", flag.ContinueOnError)
	in := fs.String("input_network", "", "")
	out := fs.String("output_path", "", "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	h, payload, err := readONNX(*in)
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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sum, err := digestFiles(nil, *cpp, *bin)
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
	if err := parseFlags(fs, args); err != nil {
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
	sum, err := digestFiles(nil, *backend, *model, *cfgFile, ext.BackendExtensions.ConfigFilePath)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*out, *name+".bin"), []byte("stand-in QNN context binary "+sum+"\n"), 0o644)
}
