// Package standin holds the onnx family's stand-ins (see internal/standin).
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
	"sort"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/onnx/report"
)

func init() {
	standin.Tools["onnx_export.py"] = onnxExport
	standin.Tools["onnx_quantize.py"] = onnxQuantize
	standin.Tools["onnx_validate.py"] = onnxValidate
	standin.Tools["onnx_bench.py"] = onnxBench
}

// ONNXHeader is the stand-in ONNX file's metadata. The file starts with
// 0x08 like a serialized ModelProto (its ir_version field), then the
// header's length (uint32) and JSON, then a payload derived from the
// source weights.
type ONNXHeader struct {
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

func WriteONNX(path string, h ONNXHeader, payload []byte) error {
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

func ReadONNX(path string) (ONNXHeader, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return ONNXHeader{}, nil, err
	}
	if len(b) < 5 || b[0] != 0x08 {
		return ONNXHeader{}, nil, fmt.Errorf("%s is not an ONNX model", path)
	}
	n := binary.LittleEndian.Uint32(b[1:5])
	if int(n) > len(b)-5 {
		return ONNXHeader{}, nil, fmt.Errorf("%s: truncated header", path)
	}
	var h ONNXHeader
	if err := json.Unmarshal(b[5:5+n], &h); err != nil {
		return ONNXHeader{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, b[5+n:], nil
}

// onnxExport: onnx_export.py --model DIR --out DIR [--opset N] [--no-past]
func onnxExport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("onnx_export", flag.ContinueOnError)
	model := fs.String("model", "", "")
	out := fs.String("out", "", "")
	opset := fs.Int("opset", 18, "")
	noPast := fs.Bool("no-past", false, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *out == "" {
		return errors.New("usage: onnx_export.py --model DIR --out DIR [--opset N] [--no-past]")
	}
	if *opset < 17 {
		return fmt.Errorf("--opset must be 17 or newer")
	}
	sum, err := standin.CheckpointDigest(*model)
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
	h := ONNXHeader{StandIn: true, Kind: "fp32", Bits: 32, Opset: *opset, HiddenSize: cfg.HiddenSize, Source: sum}
	if !*noPast {
		h.KVLayers = max(cfg.Layers, 1)
	}
	if err := WriteONNX(filepath.Join(*out, "model.onnx"), h, payload); err != nil {
		return err
	}
	if err := standin.CopyCheckpointFiles(*model, *out); err != nil {
		return err
	}
	files, size, err := folderFiles(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "stand-in export of %s (opset %d)\n", *model, *opset)
	return standin.PrintJSON(stdout, report.Export{Model: "model.onnx", Opset: *opset,
		Inputs: []string{"input_ids", "attention_mask", "position_ids"}, Outputs: []string{"logits"},
		KVLayers: h.KVLayers, KVCache: !*noPast, Files: files, Bytes: size})
}

// folderFiles lists a folder's files, sorted, and their total size, as
// the real scripts report what they wrote.
func folderFiles(dir string) ([]string, int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	files := []string{}
	var size int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			return nil, 0, err
		}
		files = append(files, e.Name())
		size += info.Size()
	}
	sort.Strings(files)
	return files, size, nil
}

// onnxQuantize: onnx_quantize.py --in F --out DIR [--method hqq|rtn] [--block-size B] [--asymmetric]
// [--keep-lm-head | --lm-head-bits 4|8]
func onnxQuantize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("onnx_quantize", flag.ContinueOnError)
	in := fs.String("in", "", "")
	out := fs.String("out", "", "")
	method := fs.String("method", "hqq", "")
	bs := fs.Int("block-size", 32, "")
	asym := fs.Bool("asymmetric", false, "")
	keepHead := fs.Bool("keep-lm-head", false, "")
	headBits := fs.Int("lm-head-bits", 4, "")
	vDownBits := fs.Int("v-down-bits", 4, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *bs < 16 || *bs&(*bs-1) != 0 {
		return fmt.Errorf("--block-size %d is not a power of two of at least 16", *bs)
	}
	if *method != "hqq" && *method != "rtn" {
		return fmt.Errorf("--method %q: want hqq or rtn", *method)
	}
	if *headBits != 4 && *headBits != 8 {
		return fmt.Errorf("--lm-head-bits %d: want 4 or 8", *headBits)
	}
	if *vDownBits != 4 && *vDownBits != 8 {
		return fmt.Errorf("--v-down-bits %d: want 4 or 8", *vDownBits)
	}
	// HQQ always stores a zero point per block.
	*asym = *asym || *method == "hqq"
	h, payload, err := ReadONNX(*in)
	if err != nil {
		return err
	}
	if h.Kind != "fp32" {
		return fmt.Errorf("%s is already quantized (%s)", *in, h.Kind)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	padded := []int{}
	if h.HiddenSize%*bs != 0 {
		padded = []int{h.HiddenSize}
	}
	h.Kind, h.Bits, h.BlockSize = "int4", 4+16.0/float64(*bs), *bs
	if *asym {
		h.Bits += 4.0 / float64(*bs)
	}
	// The output projection is about a tenth of a small model's weights.
	kept := []string{}
	nbits := 7*max(h.KVLayers, 1) + 1
	lmHeadBits := *headBits
	switch {
	case *keepHead:
		h.Bits += 0.1 * (32 - h.Bits)
		kept, nbits, lmHeadBits = []string{"/lm_head/MatMul"}, nbits-1, 32
	case *headBits == 8:
		h.Bits += 0.1 * 4
	}
	// v_proj and down_proj: two of a layer's seven MatMuls, about a third
	// of its weights.
	eight := 0
	if *vDownBits == 8 {
		eight = 2 * max(h.KVLayers, 1)
		h.Bits += 0.3 * 4
	}
	if err := WriteONNX(filepath.Join(*out, "model.onnx"), h, standin.Resample(payload, h.Bits/32)); err != nil {
		return err
	}
	if err := standin.CopyCheckpointFiles(filepath.Dir(*in), *out); err != nil {
		return err
	}
	_, size, err := folderFiles(*out)
	if err != nil {
		return err
	}
	return standin.PrintJSON(stdout, report.Quantize{Model: "model.onnx", Method: *method, BlockSize: *bs, Symmetric: !*asym,
		MatMulNBits: nbits, MatMulFloat: len(kept), KeptFP32: kept, PaddedK: padded, Bytes: size, LMHeadBits: &lmHeadBits,
		LMHeadTied: false, EightBitLayers: eight})
}

// logitDiff is the stand-in's max |logit difference| against PyTorch:
// kernel rounding for fp32, growing as weights lose bits.
func logitDiff(bits float64) float64 {
	if bits >= 32 {
		return 1e-4
	}
	return 40 * standin.Drift(bits)
}

// onnxValidate: onnx_validate.py --onnx F --hf DIR --text T [--ctx N] [--chunks K]
// [--scores-out DIR] [--baseline-scores DIR]
func onnxValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("onnx_validate", flag.ContinueOnError)
	model := fs.String("onnx", "", "")
	hf := fs.String("hf", "", "")
	textFile := fs.String("text", "", "")
	nctx := fs.Int("ctx", 512, "")
	chunks := fs.Int("chunks", -1, "")
	fs.Int("threads", 0, "")
	scores := standin.AddScoreFlags(fs)
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	h, _, err := ReadONNX(*model)
	if err != nil {
		return err
	}
	src, err := standin.CheckpointDigest(*hf)
	if err != nil {
		return err
	}
	if src != h.Source {
		return fmt.Errorf("%s was not converted from %s", *model, *hf)
	}
	if h.SeqLen > 0 && h.SeqLen != *nctx {
		return fmt.Errorf("the graph takes exactly %d tokens (static shape), but --ctx is %d", h.SeqLen, *nctx)
	}
	ppl, tokens, n, err := standin.EvalChunks(*textFile, *nctx, *chunks)
	if err != nil {
		return err
	}
	ppl += standin.Drift(h.Bits)
	scored := n * (*nctx - 1 - *nctx/2)
	// The graph's bytes, weights and all: each model's scores its own.
	graph, err := standin.DigestFiles(nil, *model)
	if err != nil {
		return err
	}
	kl, baseTop1, err := scores.Scores(ppl, scored, []byte(graph))
	if err != nil {
		return err
	}
	d, mean, top1, positions := logitDiff(h.Bits), logitDiff(h.Bits)/10, 1-standin.Drift(h.Bits), *nctx
	return standin.PrintJSON(stdout, report.Validate{PPL: ppl, Chunks: n, Ctx: *nctx,
		Scored: scored, Tokens: tokens, Providers: []string{"CPUExecutionProvider"},
		LogitsCheck:  report.LogitsCheck{MaxAbs: &d, MeanAbs: &mean, Top1: &top1, Positions: &positions},
		KLDivergence: kl, BaselineTop1: baseTop1})
}
