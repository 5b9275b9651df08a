package mlc

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/steps"
)

// MLC LLM (WebLLM) steps, by mlc_llm's documented command lines:
//
//	mlc_llm convert_weight MODEL --quantization q4f16_1 -o OUT
//	mlc_llm gen_config MODEL --quantization q4f16_1 --conv-template T --context-window-size N -o OUT
//	mlc_llm compile OUT/mlc-chat-config.json --device webgpu -o OUT/model.wasm
//
// The weights do not depend on the context, so one conversion serves every
// context; gen_config (and compile) copy them beside the files they write,
// since WebLLM loads one folder.
type (
	mlcConvertWeight struct{}
	mlcGenConfig     struct{}
	mlcCompile       struct{}
	mlcValidate      struct{}
)

// ToolMLCLLM is MLC LLM's command line.
const ToolMLCLLM = "mlc_llm"

// Files of an MLC model folder.
const (
	MLCChatConfig  = "mlc-chat-config.json"
	MLCTensorCache = "tensor-cache.json"
	MLCWasm        = "model.wasm"
)

// mlcShardLimit is the most bytes tvmjs.dump_tensor_cache puts in a shard.
const mlcShardLimit = 32 << 20

func (mlcConvertWeight) Name() string { return "mlc-convert-weight" }
func (mlcConvertWeight) Version() int { return 1 }

// WeightParams are an mlc-convert-weight step's.
type WeightParams struct {
	Quantization string `json:"quantization"`
	// Scales is the native converter's scale choice (ScalesMSE or
	// ScalesMLC); empty for mlc_llm's convert_weight.
	Scales string `json:"scales,omitempty"`
	// Rounding is RoundingGPTQ (the default), RoundingGPTQEmbedding or
	// RoundingRTN with imatrix scales.
	Rounding string `json:"rounding,omitempty"`
	// AWQ: the native converter rescales input columns by their
	// activations before quantizing (imatrix scales, rounding rtn or
	// gptq-embedding).
	AWQ bool `json:"awq,omitempty"`
	// CalibContext and CalibChunks: the windows of calibration text the
	// imatrix pass reads (scales imatrix only).
	CalibContext int `json:"calib_context,omitempty"`
	CalibChunks  int `json:"calib_chunks,omitempty"`
}

// ConfigParams are an mlc-gen-config step's.
type ConfigParams struct {
	Quantization string `json:"quantization"`
	// Context is the target's context window.
	Context      int    `json:"context"`
	ConvTemplate string `json:"conv_template"`
}

// CompileParams are an mlc-compile step's.
type CompileParams struct {
	Device string `json:"device"`
}

// ValidateParams are an mlc-validate step's.
type ValidateParams struct {
	// Context is the context window the config must declare.
	Context int `json:"context"`
	// Quantization is the one the folder must hold (q4f16_1 when empty:
	// plans saved before q4f32_1 existed).
	Quantization string `json:"quantization,omitempty"`
}

func (mlcConvertWeight) NewParams() any { return &WeightParams{} }
func (mlcGenConfig) NewParams() any     { return &ConfigParams{} }
func (mlcCompile) NewParams() any       { return &CompileParams{} }
func (mlcValidate) NewParams() any      { return &ValidateParams{} }

func (mlcConvertWeight) Tools(any) []string { return []string{ToolMLCLLM} }
func (mlcConvertWeight) Resources(any) steps.Resources {
	return steps.Resources{Cores: 2, MemoryMB: 3072}
}

func (mlcConvertWeight) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	q := steps.ParamsOf[WeightParams](sc.Params).Quantization
	if err := sc.RunTool(ctx, ToolMLCLLM, "convert_weight", src.Dir, "--quantization", q, "-o", sc.Out); err != nil {
		return err
	}
	cache, err := readMLCCache(sc.Out)
	if err != nil {
		return fmt.Errorf("mlc_llm convert_weight: %w", err)
	}
	sc.Result.SetFile("tensor_cache", MLCTensorCache)
	sc.Result.SetFact("quantization", q)
	sc.Result.SetMetric("shards", float64(len(cache.Records)))
	sc.Result.SetMetric("bits_per_param", cache.Metadata.BitsPerParam)
	return nil
}

func (mlcGenConfig) Name() string       { return "mlc-gen-config" }
func (mlcGenConfig) Version() int       { return 1 }
func (mlcGenConfig) Tools(any) []string { return []string{ToolMLCLLM} }
func (mlcGenConfig) Resources(any) steps.Resources {
	return steps.Resources{Cores: 1, MemoryMB: 512}
}

func (mlcGenConfig) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	weights, err := sc.Input(mlcConvertWeight{})
	if err != nil {
		return err
	}
	p := steps.ParamsOf[ConfigParams](sc.Params)
	n := p.Context
	if n <= 0 {
		return fmt.Errorf("mlc-gen-config: the target needs a context (tokens) for --context-window-size, got %d", n)
	}
	if err := copyOutputs(weights.Dir, sc.Out); err != nil {
		return err
	}
	args := []string{"gen_config", src.Dir, "--quantization", p.Quantization,
		"--conv-template", p.ConvTemplate,
		"--context-window-size", strconv.Itoa(n), "-o", sc.Out}
	if err := sc.RunTool(ctx, ToolMLCLLM, args...); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(sc.Out, MLCChatConfig)); err != nil {
		return fmt.Errorf("mlc_llm gen_config wrote no %s (see %s)", MLCChatConfig, sc.LogPath)
	}
	sc.Result.SetFile("model", MLCChatConfig)
	sc.Result.SetFile("tensor_cache", MLCTensorCache)
	sc.Result.SetMetric("context", float64(n))
	return nil
}

func (mlcCompile) Name() string       { return "mlc-compile" }
func (mlcCompile) Version() int       { return 1 }
func (mlcCompile) Tools(any) []string { return []string{ToolMLCLLM} }
func (mlcCompile) Resources(any) steps.Resources {
	// TVM compiles the model library with every core it gets.
	return steps.Resources{Cores: 2, MemoryMB: 4096}
}

func (mlcCompile) Run(ctx context.Context, sc *steps.Context) error {
	cfg, err := firstInput(sc, mlcGenConfig{}, mlcNativeConfig{})
	if err != nil {
		return err
	}
	if err := copyOutputs(cfg.Dir, sc.Out); err != nil {
		return err
	}
	device := steps.ParamsOf[CompileParams](sc.Params).Device
	if err := sc.RunTool(ctx, ToolMLCLLM, "compile", filepath.Join(sc.Out, MLCChatConfig),
		"--device", device, "-o", filepath.Join(sc.Out, MLCWasm)); err != nil {
		return err
	}
	if err := checkWasm(filepath.Join(sc.Out, MLCWasm)); err != nil {
		return fmt.Errorf("mlc_llm compile: %w", err)
	}
	sc.Result.SetFile("model", MLCChatConfig)
	sc.Result.SetFile("model_lib", MLCWasm)
	sc.Result.SetFact("device", device)
	return nil
}

func checkWasm(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != "\x00asm" {
		return fmt.Errorf("%s is not a WebAssembly module", path)
	}
	return nil
}

// copyOutputs copies a step's outputs (not its result and log) into out.
func copyOutputs(from, out string) error {
	return filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil || rel == "." {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(out, rel), 0o755)
		}
		if rel == steps.ResultFile || rel == "step.log" {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		dst, err := os.OpenFile(filepath.Join(out, rel), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(dst, in); err != nil {
			dst.Close()
			return err
		}
		return dst.Close()
	})
}

// mlcCache is tensor-cache.json.
type mlcCache struct {
	Metadata struct {
		ParamSize    int     `json:"ParamSize"`
		ParamBytes   float64 `json:"ParamBytes"`
		BitsPerParam float64 `json:"BitsPerParam"`
	} `json:"metadata"`
	Records []struct {
		DataPath string `json:"dataPath"`
		Format   string `json:"format"`
		NBytes   int64  `json:"nbytes"`
		MD5      string `json:"md5sum"`
		Records  []struct {
			Name       string `json:"name"`
			Shape      []int  `json:"shape"`
			Dtype      string `json:"dtype"`
			Format     string `json:"format"`
			NBytes     int64  `json:"nbytes"`
			ByteOffset int64  `json:"byteOffset"`
		} `json:"records"`
	} `json:"records"`
}

func readMLCCache(dir string) (*mlcCache, error) {
	b, err := boundedfile.Read(filepath.Join(dir, MLCTensorCache), boundedfile.SidecarLimit)
	if err != nil {
		return nil, fmt.Errorf("no %s: %w", MLCTensorCache, err)
	}
	var c mlcCache
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", MLCTensorCache, err)
	}
	return &c, nil
}

func (mlcValidate) Name() string       { return "mlc-validate" }
func (mlcValidate) Version() int       { return 1 }
func (mlcValidate) Tools(any) []string { return nil }
func (mlcValidate) Resources(any) steps.Resources {
	return steps.Resources{Cores: 1, MemoryMB: 256}
}

// checkShards reads every shard the tensor cache lists and checks its
// size, md5 and the records' byte ranges; it returns the problems found,
// each tensor's spec by name and the tensors' bytes.
func checkShards(ctx context.Context, dir string, cache *mlcCache) (problems []string, got map[string]mlcTensorSpec, total int64, err error) {
	got = map[string]mlcTensorSpec{}
	for _, sh := range cache.Records {
		if err := ctx.Err(); err != nil {
			return nil, nil, 0, err
		}
		b, err := os.ReadFile(filepath.Join(dir, sh.DataPath))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", sh.DataPath, err))
			continue
		}
		sum := md5.Sum(b)
		switch {
		case int64(len(b)) != sh.NBytes:
			problems = append(problems, fmt.Sprintf("%s: %d bytes, tensor-cache.json says %d", sh.DataPath, len(b), sh.NBytes))
		case hex.EncodeToString(sum[:]) != sh.MD5:
			problems = append(problems, fmt.Sprintf("%s: md5 %x, tensor-cache.json says %s", sh.DataPath, sum, sh.MD5))
		case sh.NBytes > mlcShardLimit && len(sh.Records) > 1:
			problems = append(problems, fmt.Sprintf("%s: %d bytes in %d tensors, over the 32 MiB shard limit", sh.DataPath, sh.NBytes, len(sh.Records)))
		}
		for _, r := range sh.Records {
			if r.ByteOffset < 0 || r.ByteOffset+r.NBytes > sh.NBytes {
				problems = append(problems, fmt.Sprintf("%s: bytes %d+%d outside %s", r.Name, r.ByteOffset, r.NBytes, sh.DataPath))
			}
			got[r.Name] = mlcTensorSpec{shape: r.Shape, dtype: r.Dtype}
			if r.Dtype == "float32" && r.Format == "f32-to-bf16" {
				// tvmjs stores float32 as bfloat16 but counts 4 bytes in ParamBytes.
				total += 2 * r.NBytes
			} else {
				total += r.NBytes
			}
		}
	}
	return problems, got, total, nil
}

// Run checks the MLC folder's layout against the checkpoint's config: what
// WebLLM will load, without WebGPU. The numbers it cannot check (the
// model's outputs) are not claimed.
func (mlcValidate) Run(ctx context.Context, sc *steps.Context) error {
	model, err := firstInput(sc, mlcCompile{}, mlcGenConfig{}, mlcNativeConfig{})
	if err != nil {
		return err
	}
	vp := steps.ParamsOf[ValidateParams](sc.Params)
	quant := vp.Quantization
	if quant == "" {
		quant = "q4f16_1"
	}
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	add := func(name string, ok bool, detail string) {
		sc.Result.Checks = append(sc.Result.Checks, steps.Check{Name: name, Passed: ok, Detail: detail})
	}
	cache, err := readMLCCache(model.Dir)
	if err != nil {
		add("tensor-cache.json", false, err.Error())
		return nil
	}
	// Shards: present, of the recorded size and md5, within tvmjs's limit.
	problems, got, total, err := checkShards(ctx, model.Dir, cache)
	if err != nil {
		return err
	}
	add("shards match tensor-cache.json", len(problems) == 0 && len(cache.Records) > 0,
		summarize(fmt.Sprintf("%d shards, sizes and md5sums as recorded, at most 32 MiB each", len(cache.Records)), problems))

	// Tensors: the names, shapes and dtypes MLC's Llama with q4f16_1 has.
	cfg, err := readHFLlamaConfig(src.Dir)
	if err != nil {
		add("tensors match the checkpoint's config", false, err.Error())
		return nil
	}
	want := mlcQ4Llama(cfg, scaleDtype(quant))
	problems = nil
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			problems = append(problems, name+" missing")
			continue
		}
		if g.dtype != w.dtype || fmt.Sprint(g.shape) != fmt.Sprint(w.shape) {
			problems = append(problems, fmt.Sprintf("%s: %s%v, want %s%v", name, g.dtype, g.shape, w.dtype, w.shape))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			problems = append(problems, name+" unexpected")
		}
	}
	if cache.Metadata.ParamSize != len(got) || int64(cache.Metadata.ParamBytes) != total {
		problems = append(problems, fmt.Sprintf("metadata says %d tensors, %.0f bytes; the records hold %d, %d",
			cache.Metadata.ParamSize, cache.Metadata.ParamBytes, len(got), total))
	}
	add("tensors match the checkpoint's config", len(problems) == 0,
		summarize(fmt.Sprintf("%d tensors: q_weight uint32 [out, in/8] and q_scale %s [out, in/32] (group 32), qkv and gate_up fused", len(want), scaleDtype(quant)), problems))

	// mlc-chat-config.json: the context and quantization the recipe asked for.
	var chat struct {
		Quantization string `json:"quantization"`
		Context      int    `json:"context_window_size"`
	}
	b, err := boundedfile.Read(filepath.Join(model.Dir, MLCChatConfig), boundedfile.ModelJSONLimit)
	if err == nil {
		err = json.Unmarshal(b, &chat)
	}
	wantCtx := vp.Context
	add("mlc-chat-config.json", err == nil && chat.Quantization == quant && (wantCtx == 0 || chat.Context == wantCtx),
		fmt.Sprintf("quantization %q, context_window_size %d (want %s, %d)%s", chat.Quantization, chat.Context, quant, wantCtx, errText(err)))
	if model.Kind == "mlc-compile" {
		err := checkWasm(filepath.Join(model.Dir, MLCWasm))
		add("model library", err == nil, "model.wasm is a WebAssembly module"+errText(err))
	}
	sc.Result.SetMetric("bits_per_param", cache.Metadata.BitsPerParam)
	sc.Result.SetMetric("param_bytes", cache.Metadata.ParamBytes)
	sc.Result.SetFact("validated", "layout only: running the model needs WebGPU and the compiled model library")
	return nil
}

type mlcTensorSpec struct {
	shape []int
	dtype string
}

type hfLlamaConfig struct {
	ModelType  string `json:"model_type"`
	Hidden     int    `json:"hidden_size"`
	Inter      int    `json:"intermediate_size"`
	Layers     int    `json:"num_hidden_layers"`
	Heads      int    `json:"num_attention_heads"`
	KVHeads    int    `json:"num_key_value_heads"`
	HeadDim    int    `json:"head_dim"`
	Vocab      int    `json:"vocab_size"`
	TieEmbed   bool   `json:"tie_word_embeddings"`
	MaxContext int    `json:"max_position_embeddings"`
}

func readHFLlamaConfig(dir string) (hfLlamaConfig, error) {
	var c hfLlamaConfig
	b, err := boundedfile.Read(filepath.Join(dir, "config.json"), boundedfile.ModelJSONLimit)
	if err != nil {
		return c, fmt.Errorf("the checkpoint has no config.json: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("config.json: %w", err)
	}
	if c.ModelType != "llama" {
		return c, fmt.Errorf("model type %q: the layout check knows MLC's llama parameters only", c.ModelType)
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	return c, nil
}

// scaleDtype is the model dtype of an MLC q4 quantization: its scales'
// and norms' dtype.
func scaleDtype(quant string) string {
	if quant == "q4f32_1" {
		return "float32"
	}
	return "float16"
}

// firstInput is the input of the first of kinds the step has.
func firstInput(sc *steps.Context, kinds ...steps.Kind) (steps.Input, error) {
	var names []string
	for _, k := range kinds {
		if in, err := sc.Input(k); err == nil {
			return in, nil
		}
		names = append(names, k.Name())
	}
	return steps.Input{}, fmt.Errorf("step %s needs an input from one of %s", sc.StepID, strings.Join(names, ", "))
}

// mlcQ4Llama lists the tensors of MLC's Llama under q4f16_1 or q4f32_1
// (python/mlc_llm/model/llama): linear weights and the embedding become
// q_weight/q_scale, norms stay in the model dtype, q/k/v and gate/up are
// fused.
func mlcQ4Llama(c hfLlamaConfig, dtype string) map[string]mlcTensorSpec {
	out := map[string]mlcTensorSpec{}
	quant := func(name string, rows, cols int) {
		out[name+".q_weight"] = mlcTensorSpec{[]int{rows, (cols + 7) / 8}, "uint32"}
		out[name+".q_scale"] = mlcTensorSpec{[]int{rows, (cols + 31) / 32}, dtype}
	}
	quant("model.embed_tokens", c.Vocab, c.Hidden)
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		out[p+"input_layernorm.weight"] = mlcTensorSpec{[]int{c.Hidden}, dtype}
		out[p+"post_attention_layernorm.weight"] = mlcTensorSpec{[]int{c.Hidden}, dtype}
		quant(p+"self_attn.qkv_proj", (c.Heads+2*c.KVHeads)*c.HeadDim, c.Hidden)
		quant(p+"self_attn.o_proj", c.Hidden, c.Heads*c.HeadDim)
		quant(p+"mlp.gate_up_proj", 2*c.Inter, c.Hidden)
		quant(p+"mlp.down_proj", c.Hidden, c.Inter)
	}
	out["model.norm.weight"] = mlcTensorSpec{[]int{c.Hidden}, dtype}
	if !c.TieEmbed {
		quant("lm_head", c.Vocab, c.Hidden)
	}
	return out
}

func summarize(ok string, problems []string) string {
	if len(problems) == 0 {
		return ok
	}
	if len(problems) > 3 {
		return fmt.Sprintf("%s; and %d more", strings.Join(problems[:3], "; "), len(problems)-3)
	}
	return strings.Join(problems, "; ")
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}
