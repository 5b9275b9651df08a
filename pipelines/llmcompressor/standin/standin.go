// Package standin holds the llmcompressor family's stand-ins (see internal/standin).
package standin

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/llmcompressor/report"
	shared "github.com/edgepipe/edgepipe/pipelines/shared/report"
	sharedstandin "github.com/edgepipe/edgepipe/pipelines/shared/standin"
)

func init() {
	standin.Tools["llmc_quantize.py"] = llmcQuantize
	standin.Tools["llmc_perplexity.py"] = llmcPerplexity
	standin.Tools["llmc_decode.py"] = llmcDecode
}

// llmcDecode: llmc_decode.py --model DIR --reference FILE [--threads N].
// Like the real script it needs a compressed-tensors checkpoint; its
// numbers are the shared decode stand-in's for the checkpoint's bytes.
func llmcDecode(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llmc_decode", flag.ContinueOnError)
	model := fs.String("model", "", "")
	ref := fs.String("reference", "", "")
	fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *ref == "" {
		return errors.New("usage: llmc_decode.py --model DIR --reference FILE")
	}
	cfg, err := os.ReadFile(filepath.Join(*model, "config.json"))
	if err != nil || !bytes.Contains(cfg, []byte(`"compressed-tensors"`)) {
		return fmt.Errorf("%s is not a compressed-tensors checkpoint", *model)
	}
	ckpt, err := standin.CheckpointDigest(*model)
	if err != nil {
		return err
	}
	rep, err := sharedstandin.DecodeReport(ckpt, *ref, "transformers with compressed-tensors, its DynamicCache KV cache")
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(rep)
}

// llmcQuantize: llmc_quantize.py --model DIR --calibration TEXT --out DIR
// --scheme gptq|awq --group-size N [--samples N] [--seq-len N]. It writes
// the layout llmcompressor saves: config.json with a compressed-tensors
// quantization_config, and a safetensors file whose linears are int32
// weight_packed [out, in/8] with weight_scale [out, in/group] (layer 0 only,
// to stay small), filled with bytes derived from the model, the text and the
// options. Like the real script it refuses a group size that does not
// divide every linear layer's input width.
// checkChoices refuses what the real script's argparse choices refuse.
func checkChoices(rounding, observer, actorder string) error {
	if rounding != "gptq" && rounding != "rtn" {
		return fmt.Errorf("--rounding %q (gptq|rtn) is not one the script takes", rounding)
	}
	if observer != "minmax" && observer != "mse" || actorder != "static" && actorder != "group" && actorder != "none" {
		return fmt.Errorf("--observer %q (minmax|mse) or --actorder %q (static|group|none) is not one the script takes", observer, actorder)
	}
	return nil
}

func llmcQuantize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llmc_quantize", flag.ContinueOnError)
	model := fs.String("model", "", "")
	calib := fs.String("calibration", "", "")
	out := fs.String("out", "", "")
	scheme := fs.String("scheme", "", "")
	group := fs.Int("group-size", 0, "")
	samples := fs.Int("samples", 32, "")
	seqLen := fs.Int("seq-len", 512, "")
	grid := fs.Int("n-grid", 20, "")
	symmetric := fs.Bool("symmetric", false, "")
	observer := fs.String("observer", "minmax", "")
	actorder := fs.String("actorder", "static", "")
	rounding := fs.String("rounding", "gptq", "")
	vdown := fs.Int("v-down-bits", 4, "")
	fs.Int("threads", 0, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *calib == "" || *out == "" || (*scheme != "gptq" && *scheme != "awq") || *group <= 0 {
		return errors.New("usage: llmc_quantize.py --model DIR --calibration TEXT --out DIR --scheme gptq|awq --group-size N")
	}
	if err := checkChoices(*rounding, *observer, *actorder); err != nil {
		return err
	}
	if *vdown != 4 && *vdown != 8 {
		return fmt.Errorf("--v-down-bits %d (4|8) is not one the script takes", *vdown)
	}
	cfgBytes, err := os.ReadFile(filepath.Join(*model, "config.json"))
	if err != nil {
		return fmt.Errorf("no config.json in %s: not a Hugging Face checkpoint", *model)
	}
	var cfg map[string]any
	if err := json.Unmarshal(cfgBytes, &cfg); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	hidden, inter := intField(cfg, "hidden_size"), intField(cfg, "intermediate_size")
	if hidden <= 0 || inter <= 0 {
		return errors.New("config.json needs hidden_size and intermediate_size")
	}
	for _, w := range []int{hidden, inter} {
		if w%*group != 0 {
			return fmt.Errorf("group size %d does not divide the input width %d of every Linear layer", *group, w)
		}
	}
	text, err := os.ReadFile(*calib)
	if err != nil {
		return err
	}
	_, words := standin.TextPerplexity(text)
	if words < *seqLen {
		return fmt.Errorf("the calibration text has %d tokens, fewer than one sample of %d", words, *seqLen)
	}
	n := min(*samples, words / *seqLen)
	digest, err := standin.CheckpointDigest(*model)
	if err != nil {
		return err
	}
	seed := sha256.Sum256(fmt.Appendf(nil, "%s\n%x\n%s %d %d %d %d %t %s %s %d", digest, sha256.Sum256(text), *scheme, *group, n, *seqLen, *grid,
		*symmetric, *observer, *actorder+" "+*rounding, *vdown))

	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	weights := map[string]any{"num_bits": 4, "type": "int", "strategy": "group", "group_size": *group, "symmetric": *symmetric,
		"observer": *observer}
	groups := map[string]any{"group_0": map[string]any{"targets": []string{"Linear"}, "weights": weights}}
	if *vdown == 8 {
		eight := maps.Clone(weights)
		eight["num_bits"] = 8
		groups["group_1"] = map[string]any{"targets": []string{`re:.*\.(v_proj|down_proj)$`}, "weights": eight}
	}
	cfg["quantization_config"] = map[string]any{
		"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
		"config_groups": groups, "ignore": []string{"lm_head"},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "config.json"), b, 0o644); err != nil {
		return err
	}
	tensors, linears, eightBit := layer0Tensors(cfg, hidden, inter, *group, *symmetric, *vdown == 8)
	if err := writeSafetensors(filepath.Join(*out, "model.safetensors"), tensors, seed[:]); err != nil {
		return err
	}
	for _, tok := range []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt"} {
		if b, err := os.ReadFile(filepath.Join(*model, tok)); err == nil {
			if err := os.WriteFile(filepath.Join(*out, tok), b, 0o644); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(stderr, "llmc_quantize: %d calibration samples of %d tokens\n", n, *seqLen)
	res := report.Quantize{Scheme: *scheme, GroupSize: *group, Samples: n, SeqLen: *seqLen, CalibrationTokens: words,
		Symmetric: *symmetric, Observer: *observer, QuantizedLinears: linears, EightBitLinears: eightBit,
		Format: ptr("pack-quantized"), Seconds: 0.1, Versions: map[string]string{"llmcompressor": "stand-in"}}
	// What the real script reports: GPTQ's order where GPTQ rounds, AWQ's
	// settings for AWQ.
	if *scheme == "gptq" || *rounding == "gptq" {
		res.ActOrder = actorder
	}
	if *scheme == "awq" {
		res.Rounding, res.NGrid = rounding, grid
	}
	return json.NewEncoder(stdout).Encode(res)
}

func ptr[T any](v T) *T { return &v }

// layer0Tensors are the packed tensors of layer 0's linears as
// compressed-tensors saves them: int32 weight_packed [out, in/8] (in/4
// for the 8-bit v_proj and down_proj when eight), weight_scale [out,
// in/group], weight_shape, and zero points unless symmetric. It returns
// them, how many linears there are and how many of them are 8-bit.
func layer0Tensors(cfg map[string]any, hidden, inter, group int, symmetric, eight bool) ([]stTensor, int, int) {
	heads := max(intField(cfg, "num_attention_heads"), 1)
	kv := max(intField(cfg, "num_key_value_heads"), 1)
	hd := hidden / heads
	linears := []struct {
		name    string
		out, in int
	}{
		{"self_attn.q_proj", heads * hd, hidden}, {"self_attn.k_proj", kv * hd, hidden}, {"self_attn.v_proj", kv * hd, hidden},
		{"self_attn.o_proj", hidden, heads * hd}, {"mlp.gate_proj", inter, hidden}, {"mlp.up_proj", inter, hidden},
		{"mlp.down_proj", hidden, inter},
	}
	var tensors []stTensor
	eightBit := 0
	for _, l := range linears {
		base := "model.layers.0." + l.name
		perInt := 8 // weights per int32
		if eight && (strings.HasSuffix(l.name, ".v_proj") || strings.HasSuffix(l.name, ".down_proj")) {
			perInt = 4
			eightBit++
		}
		tensors = append(tensors,
			stTensor{base + ".weight_packed", "I32", []int{l.out, l.in / perInt}},
			stTensor{base + ".weight_scale", "F32", []int{l.out, l.in / group}},
			stTensor{base + ".weight_shape", "I64", []int{2}})
		if !symmetric {
			tensors = append(tensors, stTensor{base + ".weight_zero_point", "I32", []int{l.out / perInt, l.in / group}})
		}
	}
	return tensors, len(linears), eightBit
}

// llmcPerplexity: llmc_perplexity.py --model DIR --text FILE --ctx N
// [--chunks K], scored like the hf_perplexity.py stand-in (same tokens and
// chunks), plus a drift that grows as the group size (and with it the
// rounding error) grows: 8 / 2^(4 + 64/group), AWQ 10% below GPTQ.
func llmcPerplexity(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llmc_perplexity", flag.ContinueOnError)
	model := fs.String("model", "", "")
	textFile := fs.String("text", "", "")
	nctx := fs.Int("ctx", 512, "")
	chunks := fs.Int("chunks", -1, "")
	fs.String("add-bos", "auto", "")
	fs.Int("threads", 0, "")
	scores := standin.AddScoreFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfgBytes, err := os.ReadFile(filepath.Join(*model, "config.json"))
	if err != nil {
		return fmt.Errorf("no config.json in %s", *model)
	}
	var cfg struct {
		QC struct {
			Groups map[string]struct {
				Weights struct {
					GroupSize int  `json:"group_size"`
					Symmetric bool `json:"symmetric"`
				} `json:"weights"`
			} `json:"config_groups"`
		} `json:"quantization_config"`
	}
	if err := json.Unmarshal(cfgBytes, &cfg); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	g, ok := cfg.QC.Groups["group_0"]
	if !ok || g.Weights.GroupSize <= 0 {
		return fmt.Errorf("%s is not a compressed-tensors checkpoint", *model)
	}
	ckpt, err := standin.CheckpointDigest(*model)
	if err != nil {
		return err
	}
	ppl, tokens, n, err := standin.EvalChunks(*textFile, *nctx, *chunks)
	if err != nil {
		return err
	}
	d := standin.Drift(4 + 64/float64(g.Weights.GroupSize))
	if !g.Weights.Symmetric {
		d *= 0.9
	}
	ppl += d
	fmt.Fprintf(stderr, "[%d/%d] ppl so far %.4f\n", n, n, ppl)
	scored := n * (*nctx - 1 - *nctx/2)
	kl, top1, err := scores.Scores(ppl, scored, []byte(ckpt))
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(shared.Perplexity{PPL: ppl, Tokens: tokens, Chunks: n, Ctx: *nctx,
		Scored: scored, AddBOS: false, KLDivergence: kl, Top1Agreement: top1})
}

func intField(m map[string]any, k string) int {
	f, _ := m[k].(float64)
	return int(f)
}

type stTensor struct {
	name  string
	dtype string
	shape []int
}

var dtypeSize = map[string]int{"I32": 4, "F32": 4, "I64": 8, "F16": 2, "BF16": 2}

// writeSafetensors writes a valid safetensors file whose tensor bytes are
// a keyed stream derived from seed.
func writeSafetensors(path string, tensors []stTensor, seed []byte) error {
	sort.Slice(tensors, func(i, j int) bool { return tensors[i].name < tensors[j].name })
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	off := 0
	for _, t := range tensors {
		n := dtypeSize[t.dtype]
		for _, d := range t.shape {
			n *= d
		}
		header[t.name] = map[string]any{"dtype": t.dtype, "shape": t.shape, "data_offsets": []int{off, off + n}}
		off += n
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, uint64(len(h)))
	buf.Write(h)
	block := sha256.Sum256(seed)
	for written := 0; written < off; written += len(block) {
		buf.Write(block[:min(len(block), off-written)])
		block = sha256.Sum256(block[:])
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
