// Package standin holds the mlc family's stand-ins (see internal/standin).
package standin

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/internal/standin"
)

// The MLC stand-in computes the real q4f16_1 weights from the real
// checkpoint, in the real layout; only the TVM compilation (compile) is
// not reproduced: its model.wasm is a placeholder module.
func init() {
	standin.Tools["mlc_llm"] = mlcLLM
	// tiny-llama-checkpoint is a test fixture, not a stand-in: it writes a
	// small, deterministic Llama checkpoint (config.json + model.safetensors)
	// that the MLC stand-in and structural checks can read, since a binary
	// safetensors file cannot be written in a txtar script.
	standin.Tools["tiny-llama-checkpoint"] = tinyLlama
}

// mlcLLM: mlc_llm convert_weight|gen_config|compile ...
func mlcLLM(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: mlc_llm convert_weight|gen_config|compile")
	}
	pos, flags, err := standin.Args(args[1:])
	if err != nil {
		return err
	}
	switch args[0] {
	case "convert_weight":
		if len(pos) != 1 || flags["-o"] == "" || flags["--quantization"] == "" {
			return errors.New("usage: mlc_llm convert_weight MODEL --quantization q4f16_1 -o OUT")
		}
		return mlcConvertWeight(pos[0], flags["--quantization"], "mlc", flags["-o"], stdout)
	case "gen_config":
		if len(pos) != 1 || flags["-o"] == "" || flags["--quantization"] == "" || flags["--conv-template"] == "" {
			return errors.New("usage: mlc_llm gen_config MODEL --quantization q4f16_1 --conv-template T --context-window-size N -o OUT")
		}
		return mlcGenConfig(pos[0], flags, stdout)
	case "compile":
		if len(pos) != 1 || flags["-o"] == "" || flags["--device"] == "" {
			return errors.New("usage: mlc_llm compile mlc-chat-config.json --device webgpu -o model.wasm")
		}
		return mlcCompile(pos[0], flags["--device"], flags["-o"], stdout)
	}
	return fmt.Errorf("mlc_llm: unknown subcommand %q", args[0])
}

// llamaConfig is what the MLC Llama model reads from config.json.
type llamaConfig struct {
	HiddenSize        int     `json:"hidden_size"`
	IntermediateSize  int     `json:"intermediate_size"`
	NumLayers         int     `json:"num_hidden_layers"`
	NumHeads          int     `json:"num_attention_heads"`
	NumKVHeads        int     `json:"num_key_value_heads"`
	HeadDim           int     `json:"head_dim"`
	VocabSize         int     `json:"vocab_size"`
	RMSNormEps        float64 `json:"rms_norm_eps"`
	TieWordEmbeddings bool    `json:"tie_word_embeddings"`
	ModelType         string  `json:"model_type"`
	BOS               int     `json:"bos_token_id"`
	EOS               any     `json:"eos_token_id"`
	Pad               any     `json:"pad_token_id"`
}

func readLlamaConfig(dir string) (llamaConfig, error) {
	var c llamaConfig
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return c, fmt.Errorf("no config.json in %s", dir)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("config.json: %w", err)
	}
	if c.ModelType != "llama" {
		return c, fmt.Errorf("model type %q: this stand-in converts only the llama architecture", c.ModelType)
	}
	if c.NumKVHeads == 0 {
		c.NumKVHeads = c.NumHeads
	}
	if c.HeadDim == 0 && c.NumHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumHeads
	}
	return c, nil
}

// MLCRecord is one tensor of tensor-cache.json.
type MLCRecord struct {
	Name       string `json:"name"`
	Shape      []int  `json:"shape"`
	Dtype      string `json:"dtype"`
	Format     string `json:"format"`
	NBytes     int64  `json:"nbytes"`
	ByteOffset int64  `json:"byteOffset"`
}

// MLCShard is one params_shard_N.bin of tensor-cache.json.
type MLCShard struct {
	DataPath string      `json:"dataPath"`
	Format   string      `json:"format"`
	NBytes   int64       `json:"nbytes"`
	Records  []MLCRecord `json:"records"`
	MD5      string      `json:"md5sum"`
}

// MLCTensorCache is tensor-cache.json, as mlc_llm convert_weight writes it
// (tvmjs.dump_tensor_cache).
type MLCTensorCache struct {
	Metadata struct {
		ParamSize    int     `json:"ParamSize"`
		ParamBytes   float64 `json:"ParamBytes"`
		BitsPerParam float64 `json:"BitsPerParam"`
	} `json:"metadata"`
	Records []MLCShard `json:"records"`
}

// MLCShardLimit is the most bytes tvmjs puts in one shard (32 MiB).
const MLCShardLimit = 32 << 20

type mlcTensor struct {
	name  string
	shape []int
	dtype string
	data  []byte
}

func mlcConvertWeight(model, quant, scales, out string, stdout io.Writer) error {
	if quant != "q4f16_1" && quant != "q4f32_1" {
		return fmt.Errorf("quantization %q: this stand-in implements q4f16_1 and q4f32_1 only", quant)
	}
	f32 := quant == "q4f32_1"
	if st, err := os.Stat(model); err == nil && !st.IsDir() {
		model = filepath.Dir(model)
	}
	cfg, err := readLlamaConfig(model)
	if err != nil {
		return err
	}
	st, err := ReadSafetensorsDir(model)
	if err != nil {
		return err
	}
	var (
		tensors   []mlcTensor
		srcParams int64
	)
	for _, t := range st {
		srcParams += int64(t.Elements())
	}
	get := func(name string) (*Tensor, error) {
		t, ok := st[name]
		if !ok {
			return nil, fmt.Errorf("parameter %s not found in the checkpoint", name)
		}
		return t, nil
	}
	quantize := func(dst string, parts ...string) error {
		var rows [][]float32
		cols := -1
		for _, p := range parts {
			t, err := get(p)
			if err != nil {
				return err
			}
			if len(t.Shape) != 2 {
				return fmt.Errorf("%s: shape %v, want 2 dimensions", p, t.Shape)
			}
			if cols >= 0 && t.Shape[1] != cols {
				return fmt.Errorf("%s: %d columns, the tensors fused with it have %d", p, t.Shape[1], cols)
			}
			cols = t.Shape[1]
			v, err := t.Float32()
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			for r := 0; r < t.Shape[0]; r++ {
				rows = append(rows, v[r*cols:(r+1)*cols])
			}
		}
		qw, qs, sdtype := quantizeRows(rows, cols, f32, scales)
		tensors = append(tensors,
			mlcTensor{dst + ".q_weight", []int{len(rows), (cols + 7) / 8}, "uint32", qw},
			mlcTensor{dst + ".q_scale", []int{len(rows), (cols + 31) / 32}, sdtype, qs})
		return nil
	}
	keep := func(dst, src string) error {
		t, err := get(src)
		if err != nil {
			return err
		}
		v, err := t.Float32()
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		b, dtype := encodeFloats(v, f32)
		tensors = append(tensors, mlcTensor{dst, append([]int(nil), t.Shape...), dtype, b})
		return nil
	}
	if err := quantize("model.embed_tokens", "model.embed_tokens.weight"); err != nil {
		return err
	}
	for i := 0; i < cfg.NumLayers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		steps := []error{
			keep(p+"input_layernorm.weight", p+"input_layernorm.weight"),
			quantize(p+"self_attn.qkv_proj", p+"self_attn.q_proj.weight", p+"self_attn.k_proj.weight", p+"self_attn.v_proj.weight"),
			quantize(p+"self_attn.o_proj", p+"self_attn.o_proj.weight"),
			keep(p+"post_attention_layernorm.weight", p+"post_attention_layernorm.weight"),
			quantize(p+"mlp.gate_up_proj", p+"mlp.gate_proj.weight", p+"mlp.up_proj.weight"),
			quantize(p+"mlp.down_proj", p+"mlp.down_proj.weight"),
		}
		for _, err := range steps {
			if err != nil {
				return err
			}
		}
	}
	if err := keep("model.norm.weight", "model.norm.weight"); err != nil {
		return err
	}
	if !cfg.TieWordEmbeddings {
		if err := quantize("lm_head", "lm_head.weight"); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	cache, err := writeMLCShards(out, tensors)
	if err != nil {
		return err
	}
	cache.Metadata.BitsPerParam = cache.Metadata.ParamBytes * 8 / float64(srcParams)
	b, err := json.MarshalIndent(cache, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "tensor-cache.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "[stand-in] Parameter size after quantization: %.3f GB\n[stand-in] Total parameters: %d\n[stand-in] Bits per parameter: %.3f\nSaved to directory: %s\n",
		cache.Metadata.ParamBytes/(1<<30), srcParams, cache.Metadata.BitsPerParam, out)
	return nil
}

// writeMLCShards packs tensors into shards of at most 32 MiB in order (a
// tensor larger than that gets a shard of its own), like tvmjs.
func writeMLCShards(out string, tensors []mlcTensor) (*MLCTensorCache, error) {
	cache := &MLCTensorCache{}
	var cur []byte
	var recs []MLCRecord
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		name := fmt.Sprintf("params_shard_%d.bin", len(cache.Records))
		if err := os.WriteFile(filepath.Join(out, name), cur, 0o644); err != nil {
			return err
		}
		sum := md5.Sum(cur)
		cache.Records = append(cache.Records, MLCShard{DataPath: name, Format: "raw-shard", NBytes: int64(len(cur)),
			Records: recs, MD5: hex.EncodeToString(sum[:])})
		cur, recs = nil, nil
		return nil
	}
	for _, t := range tensors {
		if len(cur) > 0 && len(cur)+len(t.data) > MLCShardLimit {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		recs = append(recs, MLCRecord{Name: t.name, Shape: t.shape, Dtype: t.dtype, Format: "f32-to-bf16",
			NBytes: int64(len(t.data)), ByteOffset: int64(len(cur))})
		cur = append(cur, t.data...)
		cache.Metadata.ParamSize++
		n := float64(len(t.data))
		if t.dtype == "float32" {
			n *= 2 // stored as bfloat16, counted as float32 (tvmjs)
		}
		cache.Metadata.ParamBytes += n
	}
	return cache, flush()
}

// Q4F16Quantize is MLC's q4f16_1 group quantization of rows x cols
// weights (python/mlc_llm/quantization/group_quantization.py, layout NK):
// groups of 32 along the input axis, scale = max|w| / 7 in float16,
// q = clamp(round(w / scale + 7), 0, 14), eight 4-bit values per uint32
// (element r of a word at bits 4r..4r+3). The arithmetic is done in
// float16, as MLC does it in the model's dtype. It returns the uint32
// words [rows, ceil(cols/8)] and the float16 scales [rows, ceil(cols/32)],
// little-endian.
func Q4F16Quantize(rows [][]float32, cols int) (qweight, qscale []byte) {
	const group, perWord, maxInt = 32, 8, 7
	words := (cols + perWord - 1) / perWord
	groups := (cols + group - 1) / group
	qweight = make([]byte, 4*words*len(rows))
	qscale = make([]byte, 2*groups*len(rows))
	q := make([]uint32, words*perWord)
	for r, row := range rows {
		for i := range q {
			q[i] = 0
		}
		for g := 0; g < groups; g++ {
			lo, hi := g*group, min((g+1)*group, cols)
			var maxAbs float32
			for _, w := range row[lo:hi] {
				maxAbs = max(maxAbs, float32(math.Abs(float64(F16ToF32(F32ToF16(w))))))
			}
			scale := F16ToF32(F32ToF16(maxAbs / maxInt))
			binary.LittleEndian.PutUint16(qscale[2*(r*groups+g):], F32ToF16(scale))
			for c := lo; c < hi; c++ {
				w := F16ToF32(F32ToF16(row[c]))
				v := F16ToF32(F32ToF16(F16ToF32(F32ToF16(w/scale)) + maxInt))
				if scale == 0 {
					v = maxInt
				}
				x := math.RoundToEven(float64(v))
				q[c] = uint32(min(max(x, 0), 2*maxInt))
			}
		}
		packRow(qweight, q, r, words)
	}
	return qweight, qscale
}

// Q4F16Dequantize inverts Q4F16Quantize for one row: (q - 7) * scale.
func Q4F16Dequantize(qweight, qscale []byte, row, cols int) []float32 {
	words := (cols + 7) / 8
	groups := (cols + 31) / 32
	out := make([]float32, cols)
	for c := 0; c < cols; c++ {
		word := binary.LittleEndian.Uint32(qweight[4*(row*words+c/8):])
		q := (word >> (4 * (c % 8))) & 0xf
		s := F16ToF32(binary.LittleEndian.Uint16(qscale[2*(row*groups+c/32):]))
		out[c] = (float32(q) - 7) * s
	}
	return out
}

func mlcGenConfig(model string, flags map[string]string, stdout io.Writer) error {
	cfg, err := readLlamaConfig(model)
	if err != nil {
		return err
	}
	ctxLen := 4096
	if v := flags["--context-window-size"]; v != "" {
		if ctxLen, err = strconv.Atoi(v); err != nil || ctxLen <= 0 {
			return fmt.Errorf("--context-window-size %q is not a positive integer", v)
		}
	}
	out := flags["-o"]
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var tokFiles []string
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "tokenizer.model", "added_tokens.json"} {
		b, err := os.ReadFile(filepath.Join(model, f))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(out, f), b, 0o644); err != nil {
			return err
		}
		tokFiles = append(tokFiles, f)
	}
	prefill := min(ctxLen, 2048)
	chat := map[string]any{
		"version":      "0.1.0",
		"model_type":   cfg.ModelType,
		"quantization": flags["--quantization"],
		"model_config": map[string]any{
			"hidden_size": cfg.HiddenSize, "intermediate_size": cfg.IntermediateSize,
			"num_attention_heads": cfg.NumHeads, "num_hidden_layers": cfg.NumLayers,
			"num_key_value_heads": cfg.NumKVHeads, "head_dim": cfg.HeadDim,
			"rms_norm_eps": cfg.RMSNormEps, "vocab_size": cfg.VocabSize,
			"tie_word_embeddings": cfg.TieWordEmbeddings, "context_window_size": ctxLen,
			"prefill_chunk_size": prefill, "tensor_parallel_shards": 1,
		},
		"vocab_size": cfg.VocabSize, "context_window_size": ctxLen, "sliding_window_size": -1,
		"prefill_chunk_size": prefill, "attention_sink_size": -1, "tensor_parallel_shards": 1,
		"conv_template": map[string]any{"name": flags["--conv-template"]},
		"bos_token_id":  cfg.BOS, "eos_token_id": cfg.EOS, "pad_token_id": cfg.Pad,
		"tokenizer_files": tokFiles,
	}
	b, err := json.MarshalIndent(chat, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "[stand-in] Dumping configuration file to: %s\n", filepath.Join(out, "mlc-chat-config.json"))
	return os.WriteFile(filepath.Join(out, "mlc-chat-config.json"), append(b, '\n'), 0o644)
}

// mlcCompile writes a placeholder WebAssembly module: the real one is TVM
// output that only the MLC toolchain (and emscripten) can produce. Its
// custom section names the config it was made from, so it moves with it.
func mlcCompile(config, device, out string, stdout io.Writer) error {
	if device != "webgpu" {
		return fmt.Errorf("device %q: this stand-in compiles for webgpu only", device)
	}
	b, err := os.ReadFile(config)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	payload := []byte("edgepipe stand-in model library, not compiled by TVM; config sha256 " + hex.EncodeToString(sum[:]))
	name := "edgepipe-standin"
	sec := append([]byte{byte(len(name))}, name...)
	sec = append(sec, payload...)
	mod := []byte{0, 'a', 's', 'm', 1, 0, 0, 0, 0}
	mod = binary.AppendUvarint(mod, uint64(len(sec)))
	mod = append(mod, sec...)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "[stand-in] Generated: %s\n", out)
	return os.WriteFile(out, mod, 0o644)
}

// tinyLlama: tiny-llama-checkpoint DIR [--layers N] [--hidden H] [--vocab V] [--seed S]
func tinyLlama(args []string, stdout, stderr io.Writer) error {
	pos, flags, err := standin.Args(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: tiny-llama-checkpoint DIR [--layers N] [--hidden H] [--vocab V] [--seed S]")
	}
	num := func(k string, def int) int {
		if v, err := strconv.Atoi(flags[k]); err == nil && v > 0 {
			return v
		}
		return def
	}
	layers, hidden, vocab, seed := num("--layers", 2), num("--hidden", 64), num("--vocab", 256), num("--seed", 1)
	heads, kv := hidden/32, max(1, hidden/64)
	inter := hidden * 2
	cfg := map[string]any{"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
		"hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
		"num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": 32, "vocab_size": vocab,
		"rms_norm_eps": 1e-5, "tie_word_embeddings": true, "bos_token_id": 1, "eos_token_id": 2,
		"max_position_embeddings": 2048}
	tensors := map[string][]int{"model.embed_tokens.weight": {vocab, hidden}, "model.norm.weight": {hidden}}
	for i := 0; i < layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		tensors[p+"input_layernorm.weight"] = []int{hidden}
		tensors[p+"post_attention_layernorm.weight"] = []int{hidden}
		tensors[p+"self_attn.q_proj.weight"] = []int{heads * 32, hidden}
		tensors[p+"self_attn.k_proj.weight"] = []int{kv * 32, hidden}
		tensors[p+"self_attn.v_proj.weight"] = []int{kv * 32, hidden}
		tensors[p+"self_attn.o_proj.weight"] = []int{hidden, heads * 32}
		tensors[p+"mlp.gate_proj.weight"] = []int{inter, hidden}
		tensors[p+"mlp.up_proj.weight"] = []int{inter, hidden}
		tensors[p+"mlp.down_proj.weight"] = []int{hidden, inter}
	}
	state := uint64(seed)*0x9E3779B97F4A7C15 + 1
	data := map[string][]float32{}
	for name, shape := range tensors {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			state ^= state << 13
			state ^= state >> 7
			state ^= state << 17
			v[i] = float32(int64(state%2001)-1000) / 10000
		}
		if strings.HasSuffix(name, "norm.weight") {
			for i := range v {
				v[i] = 1 + v[i]
			}
		}
		data[name] = v
	}
	dir := pos[0]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "config.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return WriteSafetensors(filepath.Join(dir, "model.safetensors"), tensors, data)
}

// Tensor is one tensor of a safetensors file.
type Tensor struct {
	Dtype string
	Shape []int
	Data  []byte
}

// Elements is the number of values in the tensor.
func (t *Tensor) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Float32 decodes F32, F16 or BF16 data.
func (t *Tensor) Float32() ([]float32, error) {
	n := t.Elements()
	out := make([]float32, n)
	switch t.Dtype {
	case "F32":
		if len(t.Data) != 4*n {
			return nil, fmt.Errorf("F32 data is %d bytes, want %d", len(t.Data), 4*n)
		}
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	case "F16", "BF16":
		if len(t.Data) != 2*n {
			return nil, fmt.Errorf("%s data is %d bytes, want %d", t.Dtype, len(t.Data), 2*n)
		}
		for i := range out {
			h := binary.LittleEndian.Uint16(t.Data[2*i:])
			if t.Dtype == "F16" {
				out[i] = F16ToF32(h)
			} else {
				out[i] = math.Float32frombits(uint32(h) << 16)
			}
		}
	default:
		return nil, fmt.Errorf("dtype %s is not a float type this reader decodes", t.Dtype)
	}
	return out, nil
}

// ReadSafetensors parses a safetensors file: an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}}, then
// the data.
func ReadSafetensors(path string) (map[string]*Tensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 8 {
		return nil, fmt.Errorf("%s: too short for a safetensors file", path)
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if n > uint64(len(b)-8) || n > 100<<20 {
		return nil, fmt.Errorf("%s: header length %d does not fit the file: not a safetensors file", path, n)
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	data := b[8+n:]
	out := map[string]*Tensor{}
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			Dtype   string   `json:"dtype"`
			Shape   []int    `json:"shape"`
			Offsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", path, name, err)
		}
		if e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] || e.Offsets[1] > int64(len(data)) {
			return nil, fmt.Errorf("%s: tensor %s: data offsets %v outside the file", path, name, e.Offsets)
		}
		out[name] = &Tensor{Dtype: e.Dtype, Shape: e.Shape, Data: data[e.Offsets[0]:e.Offsets[1]]}
	}
	return out, nil
}

// ReadSafetensorsDir reads every *.safetensors file of a checkpoint.
func ReadSafetensorsDir(dir string) (map[string]*Tensor, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.safetensors in %s", dir)
	}
	sort.Strings(files)
	all := map[string]*Tensor{}
	for _, f := range files {
		ts, err := ReadSafetensors(f)
		if err != nil {
			return nil, err
		}
		for k, v := range ts {
			all[k] = v
		}
	}
	return all, nil
}

// WriteSafetensors writes F32 tensors in name order.
func WriteSafetensors(path string, shapes map[string][]int, data map[string][]float32) error {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := map[string]any{}
	var body []byte
	for _, n := range names {
		start := len(body)
		for _, v := range data[n] {
			body = binary.LittleEndian.AppendUint32(body, math.Float32bits(v))
		}
		hdr[n] = map[string]any{"dtype": "F32", "shape": shapes[n], "data_offsets": []int{start, len(body)}}
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), body...)
	return os.WriteFile(path, out, 0o644)
}

// F32ToF16 rounds a float32 to the nearest float16 (ties to even).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff:
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15:
		return sign | 0x7c00
	case exp-127 >= -14:
		e := uint32(exp-127+15) << 10
		m := mant >> 13
		rest := mant & 0x1fff
		h := uint32(sign) | e | m
		if rest > 0x1000 || (rest == 0x1000 && m&1 == 1) {
			h++ // may carry into the exponent, which is still correct
		}
		return uint16(h)
	case exp-127 >= -25:
		// Subnormal half: shift the full mantissa into place.
		full := mant | 0x800000
		shift := uint32(-(exp - 127) - 14 + 13)
		m := full >> shift
		rest := full & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && m&1 == 1) {
			m++
		}
		return sign | uint16(m)
	}
	return sign
}

// F16ToF32 widens a float16.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(mant) / 1024 / 16384
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// Q4F32Quantize is q4f32_1: Q4F16Quantize's grid with float32 arithmetic;
// the float32 scales are returned as tvmjs stores them, as bfloat16.
func Q4F32Quantize(rows [][]float32, cols int) (qweight, qscale []byte) {
	const group, perWord, maxInt = 32, 8, 7
	words := (cols + perWord - 1) / perWord
	groups := (cols + group - 1) / group
	qweight = make([]byte, 4*words*len(rows))
	qscale = make([]byte, 2*groups*len(rows))
	q := make([]uint32, words*perWord)
	for r, row := range rows {
		clear(q)
		for g := 0; g < groups; g++ {
			lo, hi := g*group, min((g+1)*group, cols)
			var maxAbs float32
			for _, w := range row[lo:hi] {
				maxAbs = max(maxAbs, float32(math.Abs(float64(w))))
			}
			scale := maxAbs / maxInt
			binary.LittleEndian.PutUint16(qscale[2*(r*groups+g):], F32ToBF16(scale))
			for c := lo; c < hi; c++ {
				v := float32(maxInt)
				if scale != 0 {
					v = row[c]/scale + maxInt
				}
				q[c] = uint32(min(max(math.RoundToEven(float64(v)), 0), 2*maxInt))
			}
		}
		packRow(qweight, q, r, words)
	}
	return qweight, qscale
}

// F32ToBF16 is tvmjs's f32-to-bf16: round to nearest even inside
// bfloat16's range, truncation outside it.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	limit := math.Float32frombits(math.Float32bits(math.MaxFloat32) >> 16 << 16)
	if f < limit && f > -limit {
		b += (b>>16)&1 + 0x7fff
	}
	return uint16(b >> 16)
}

// quantizeRows is q4f16_1 or (f32) q4f32_1, with the scales' dtype.
func quantizeRows(rows [][]float32, cols int, f32 bool, scales string) (qweight, qscale []byte, dtype string) {
	if scales == "mse" {
		qw, qs := SearchQuantize(rows, cols, f32)
		if f32 {
			return qw, qs, "float32"
		}
		return qw, qs, "float16"
	}
	if f32 {
		qw, qs := Q4F32Quantize(rows, cols)
		return qw, qs, "float32"
	}
	qw, qs := Q4F16Quantize(rows, cols)
	return qw, qs, "float16"
}

// encodeFloats stores unquantized weights in the model dtype: float16, or
// float32 as tvmjs writes it (bfloat16 bytes).
func encodeFloats(v []float32, f32 bool) ([]byte, string) {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		if f32 {
			binary.LittleEndian.PutUint16(b[2*i:], F32ToBF16(x))
		} else {
			binary.LittleEndian.PutUint16(b[2*i:], F32ToF16(x))
		}
	}
	if f32 {
		return b, "float32"
	}
	return b, "float16"
}

// packRow is pack_weight for row r: eight 4-bit codes per little-endian
// uint32, element e of a word at bits 4e..4e+3.
func packRow(qweight []byte, q []uint32, r, words int) {
	for w := 0; w < words; w++ {
		var word uint32
		for e := 0; e < 8; e++ {
			word |= q[w*8+e] << (4 * e)
		}
		binary.LittleEndian.PutUint32(qweight[4*(r*words+w):], word)
	}
}
