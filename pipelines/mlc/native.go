package mlc

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/pipelines/mlc/report"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// edgepipe's own MLC converter (`backend: native`): python/mlc_native.py, in the llama toolchain's torch, writes what mlc_llm
// convert_weight and gen_config write, following mlc_llm's code (the
// script names the files and commits). It is not mlc_llm, and the
// manifest says which backend made the weights.
type (
	mlcNativeConvert struct{}
	mlcNativeConfig  struct{}
	mlcGate          struct{}
)

// Tools of the native backend and the gate, in the llama toolchain.
const (
	ToolNative = "mlc_native.py"
	ToolGate   = "mlc_gate.py"
)

// Files the native steps add.
const (
	WebLLMRecord   = "webllm-model-record.json"
	DecodedDigests = "decoded-sha256.json"
)

func (mlcNativeConvert) Name() string       { return "mlc-native-convert" }
func (mlcNativeConvert) Version() int       { return 1 }
func (mlcNativeConvert) NewParams() any     { return &WeightParams{} }
func (mlcNativeConvert) Tools(any) []string { return []string{ToolNative} }
func (mlcNativeConvert) Resources(any) steps.Resources {
	// The fp32 checkpoint, its float16 copy, one fused tensor at a time and,
	// with GPTQ rounding (the default), every linear layer's Hessian. One
	// model's peak; the split between the fixed part and the model's is
	// assumed (docs/results/memory-weights.md).
	return steps.Resources{Cores: 1, MemoryMB: 1500, ModelFactor: 2}
}

func (mlcNativeConvert) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[WeightParams](sc.Params)
	q := p.Quantization
	args := []string{"convert-weight", "--model", src.Dir, "--quantization", q, "--scales", p.Scales, "--out", sc.Out}
	if p.Scales == ScalesImatrix {
		text, err := sc.Data(steps.DataCalibration)
		if err != nil {
			return err
		}
		awq := "off"
		if p.AWQ {
			awq = "on"
		}
		args = append(args, "--rounding", p.Rounding, "--awq", awq, "--calibration", text, "--calib-ctx", strconv.Itoa(p.CalibContext), "--calib-chunks", strconv.Itoa(p.CalibChunks))
	}
	if err := sc.RunTool(ctx, ToolNative, args...); err != nil {
		return err
	}
	var rep report.Native
	if err := steps.ReadReport(ToolNative, sc.LogPath, &rep); err != nil {
		return err
	}
	res := rep.ConvertWeight
	if res == nil {
		return fmt.Errorf("%s convert-weight reported no convert_weight result (see %s)", ToolNative, sc.LogPath)
	}
	if _, err := readMLCCache(sc.Out); err != nil {
		return fmt.Errorf("%s convert-weight: %w", ToolNative, err)
	}
	sc.Result.SetFile("tensor_cache", MLCTensorCache)
	sc.Result.SetFact("quantization", q)
	sc.Result.SetFact("scales", scalesFact(p.Scales))
	switch p.Rounding {
	case RoundingGPTQ:
		if res.LinearRounding == "gptq" {
			sc.Result.SetFact("rounding", fmt.Sprintf("gptq: each weight's rounding error spread over the columns not yet rounded through the inverse Hessian of the calibration activations (GPTQ), the columns in act order with every group's scale searched up front; q/k/v's Hessian gives each calibration window's first token (the attention sink) %.0f%% of its weight; the embedding rounded %s", 100*res.SinkShare, res.EmbeddingRounding))
			sc.Result.SetMetric("sink_share", res.SinkShare)
		} else {
			sc.Result.SetFact("rounding", "gptq asked, every weight to its nearest code: the linear layers were rounded "+res.LinearRounding)
		}
	case RoundingGPTQEmbedding:
		if res.EmbeddingRounding == "gptq" {
			sc.Result.SetFact("rounding", "gptq-embedding: the tied embedding rounded by GPTQ through the output projection's calibration Hessian, the linear layers to their nearest code")
		} else {
			sc.Result.SetFact("rounding", "gptq-embedding asked, every weight to its nearest code: the embedding was rounded "+res.EmbeddingRounding)
		}
	}
	if p.Scales == ScalesImatrix {
		sc.Result.SetMetric("calibration_tokens", float64(res.CalibrationTokens))
	}
	if p.AWQ {
		sc.Result.SetFact("awq", "each linear layer's input columns rescaled by their calibration activations (AWQ), folded into the norms and the v/up rows that produce them; the exponent searched per layer for the least output error")
		for kind, a := range res.AWQ {
			sc.Result.SetMetric("awq_alpha_"+kind, a.MeanAlpha)
			if a.OutputErrorUnscaled > 0 {
				sc.Result.SetMetric("awq_error_ratio_"+kind, a.OutputError/a.OutputErrorUnscaled)
			}
		}
	}
	sc.Result.SetFact("backend", "native: edgepipe's mlc_native.py (not mlc_llm), following mlc_llm's group quantization at mlc-ai/mlc-llm@79d603f0 and tvmjs.dump_tensor_cache at apache/tvm@09067173 (torch "+res.Torch+")")
	sc.Result.SetMetric("shards", float64(res.Shards))
	sc.Result.SetMetric("tensors", float64(res.Params))
	sc.Result.SetMetric("bits_per_param", res.BitsPerParam)
	return nil
}

func (mlcNativeConfig) Name() string       { return "mlc-native-config" }
func (mlcNativeConfig) Version() int       { return 1 }
func (mlcNativeConfig) NewParams() any     { return &ConfigParams{} }
func (mlcNativeConfig) Tools(any) []string { return []string{ToolNative} }
func (mlcNativeConfig) Resources(any) steps.Resources {
	// The config and the tokenizer only (docs/results/memory-weights.md).
	return steps.Resources{Cores: 1, MemoryMB: 216}
}

func (mlcNativeConfig) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	weights, err := sc.Input(mlcNativeConvert{})
	if err != nil {
		return err
	}
	p := steps.ParamsOf[ConfigParams](sc.Params)
	if p.Context <= 0 {
		return fmt.Errorf("mlc-native-config: the target needs a context (tokens) for context_window_size, got %d", p.Context)
	}
	if err := copyOutputs(weights.Dir, sc.Out); err != nil {
		return err
	}
	if err := sc.RunTool(ctx, ToolNative, "gen-config", "--model", src.Dir, "--quantization", p.Quantization,
		"--conv-template", p.ConvTemplate, "--context-window-size", strconv.Itoa(p.Context), "--out", sc.Out); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(sc.Out, MLCChatConfig)); err != nil {
		return fmt.Errorf("%s gen-config wrote no %s (see %s)", ToolNative, MLCChatConfig, sc.LogPath)
	}
	rec, err := writeWebLLMRecord(sc.Out, src.Dir, p)
	if err != nil {
		return err
	}
	sc.Result.SetFile("model", MLCChatConfig)
	sc.Result.SetFile("tensor_cache", MLCTensorCache)
	sc.Result.SetFile("webllm_record", WebLLMRecord)
	sc.Result.SetMetric("context", float64(p.Context))
	sc.Result.SetFact("backend", "native: edgepipe's mlc_native.py gen-config (not mlc_llm)")
	sc.Result.SetFact("runtime_requirement", runtimeRequirement(p.Quantization))
	sc.Result.SetFact("webllm_model_lib", rec.libNote)
	return nil
}

// runtimeRequirement is what a browser needs to run the quantization in
// WebLLM.
func runtimeRequirement(q string) string {
	if q == "q4f16_1" {
		return "WebGPU with the shader-f16 feature (WebLLM refuses q4f16_1 without it: serve q4f32_1 to such browsers, or a server-side GGUF)"
	}
	return "WebGPU (no optional feature; float32 shaders)"
}

// webLLMRecord is one entry of WebLLM's AppConfig.model_list, with the
// integrity hashes (SRI) WebLLM checks for the files edgepipe made.
type webLLMRecord struct {
	Model            string            `json:"model"`
	ModelID          string            `json:"model_id"`
	ModelLib         string            `json:"model_lib"`
	RequiredFeatures []string          `json:"required_features"`
	Overrides        map[string]int    `json:"overrides"`
	LowResource      bool              `json:"low_resource_required"`
	Integrity        webLLMIntegrity   `json:"integrity"`
	Files            map[string]string `json:"edgepipe_files_sri"`
	Note             string            `json:"edgepipe_note"`
	libNote          string
}

type webLLMIntegrity struct {
	Config    string            `json:"config"`
	Tokenizer map[string]string `json:"tokenizer,omitempty"`
	OnFailure string            `json:"onFailure"`
}

// webLLMLibPrefix is where WebLLM's prebuilt model libraries live
// (web-llm src/config.ts: modelLibURLPrefix + modelVersion).
const webLLMLibPrefix = "https://raw.githubusercontent.com/mlc-ai/binary-mlc-llm-libs/main/web-llm-models/v0_2_80/"

func sri(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:]), nil
}

// writeWebLLMRecord writes the model_list entry for the folder in dir.
func writeWebLLMRecord(dir, srcDir string, p *ConfigParams) (*webLLMRecord, error) {
	name := modelName(srcDir)
	ctxK := fmt.Sprintf("ctx%dk", max(1, p.Context/1024))
	lib := fmt.Sprintf("%s-%s-%s_cs1k-webgpu.wasm", name, p.Quantization, ctxK)
	rec := &webLLMRecord{Model: "./", ModelID: fmt.Sprintf("%s-%s-MLC", name, p.Quantization), ModelLib: webLLMLibPrefix + lib,
		RequiredFeatures: []string{}, Overrides: map[string]int{"context_window_size": p.Context}, LowResource: true,
		Integrity: webLLMIntegrity{Tokenizer: map[string]string{}, OnFailure: "error"}, Files: map[string]string{}}
	if p.Quantization == "q4f16_1" {
		rec.RequiredFeatures = []string{"shader-f16"}
	}
	rec.libNote = "WebLLM's naming gives " + lib + "; WebLLM's prebuilt list has SmolLM2-135M only as q0f16/q0f32, so for this model compile the library with `backend: mlc-llm, compile: true` and point model_lib at it (no integrity hash: edgepipe did not make it)"
	rec.Note = "model is this folder's URL once hosted (WebLLM needs an absolute URL); " + rec.libNote
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && e.Name() != steps.ResultFile && e.Name() != "step.log" && e.Name() != WebLLMRecord {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		h, err := sri(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		rec.Files[n] = h
		switch {
		case n == MLCChatConfig:
			rec.Integrity.Config = h
		case strings.HasPrefix(n, "tokenizer") && n != "tokenizer_config.json":
			rec.Integrity.Tokenizer[n] = h
		}
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	return rec, os.WriteFile(filepath.Join(dir, WebLLMRecord), append(b, '\n'), 0o644)
}

// modelName names a checkpoint the way WebLLM's model ids do: the
// builtin SmolLM2 by its published name, others by their folder.
func modelName(srcDir string) string {
	b, err := os.ReadFile(filepath.Join(srcDir, "config.json"))
	if err == nil {
		var c struct {
			Name   string `json:"_model_name_or_path"`
			Hidden int    `json:"hidden_size"`
			Layers int    `json:"num_hidden_layers"`
		}
		if json.Unmarshal(b, &c) == nil && strings.HasPrefix(strings.ToLower(c.Name), "smollm2 135m") {
			return "SmolLM2-135M-Instruct"
		}
	}
	base := filepath.Base(srcDir)
	if len(base) > 40 {
		base = base[:12]
	}
	return base
}

func (mlcGate) Name() string       { return "mlc-gate" }
func (mlcGate) Version() int       { return 2 }
func (mlcGate) NewParams() any     { return &steps.Eval{} }
func (mlcGate) Tools(any) []string { return []string{ToolGate} }
func (mlcGate) Resources(any) steps.Resources {
	// The fp32 model, its decoded weights and one chunk's logits.
	// One model's peak; the split between the fixed part and the model's
	// is assumed (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 1000, ModelFactor: 2.5}
}

// Run reads the weight shards back from their files, dequantizes them into
// the unconverted model in PyTorch and scores it on the baseline's tokens.
func (mlcGate) Run(ctx context.Context, sc *steps.Context) error {
	weights, err := firstInput(sc, mlcNativeConvert{}, mlcConvertWeight{})
	if err != nil {
		return err
	}
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	base, err := sc.Input(shared.HFPerplexity)
	if err != nil {
		return err
	}
	text, err := sc.Data(steps.DataEval)
	if err != nil {
		return err
	}
	ev := steps.ParamsOf[steps.Eval](sc.Params)
	args := []string{"--mlc", weights.Dir, "--model", src.Dir, "--text", text, "--ctx", strconv.Itoa(ev.Chunk),
		"--digests", filepath.Join(sc.Out, DecodedDigests), "--threads", strconv.Itoa(sc.NumThreads())}
	if ev.MaxChunks > 0 {
		args = append(args, "--chunks", strconv.Itoa(ev.MaxChunks))
	}
	// Per-token scores for the delta's interval, and the KL divergence
	// and top-1 agreement against the baseline's top tokens.
	args = append(args, "--scores-out", sc.Out, "--baseline-scores", base.Dir)
	if err := sc.RunTool(ctx, ToolGate, args...); err != nil {
		return err
	}
	var res report.Gate
	if err := steps.ReadReport(ToolGate, sc.LogPath, &res); err != nil {
		return err
	}
	if !(res.PPL > 0) {
		return fmt.Errorf("%s reported perplexity %v: the dequantized model produces no usable probabilities (see %s)", ToolGate, res.PPL, sc.LogPath)
	}
	bp := base.Result.Perplexity
	if bp == nil {
		return fmt.Errorf("the baseline step %s recorded no perplexity", base.StepID)
	}
	pp := &steps.Perplexity{PPL: res.PPL, Baseline: bp.PPL, EvalTokens: res.Scored, Chunks: res.Chunks,
		Context: res.Ctx, Backend: "transformers, MLC shards read back and dequantized (" + res.Compute + ")",
		KLDivergence: res.KLDivergence, Top1Agreement: res.Top1Agreement}
	sc.Result.Perplexity = pp
	same := bp.EvalTokens == res.Scored && bp.Chunks == res.Chunks && bp.Context == res.Ctx
	// Other tokens fail the check below; only the same ones pair.
	if same {
		if err := shared.Interval(base, sc.Out, pp); err != nil {
			return fmt.Errorf("%s: %w", ToolGate, err)
		}
	}
	sc.Result.Checks = append(sc.Result.Checks, steps.Check{Name: "same evaluation tokens as the baseline", Passed: same,
		Detail: fmt.Sprintf("MLC: %d tokens scored in %d chunks of %d; baseline %s: %d in %d chunks of %d",
			res.Scored, res.Chunks, res.Ctx, base.StepID, bp.EvalTokens, bp.Chunks, bp.Context)})
	sc.Result.SetFile("digests", DecodedDigests)
	sc.Result.SetFact("decoded_sha256", res.DecodedSHA256)
	sc.Result.SetMetric("decoded_tensors", float64(res.Tensors))
	return nil
}

func scalesFact(scales string) string {
	switch scales {
	case ScalesMLC:
		return "mlc: max_abs / 7 per group of 32, as mlc_llm"
	case ScalesImatrix:
		return "imatrix: per group of 32, the scale with the least squared error over codes 0-15, each input column weighted by its mean squared activation on the calibration text; decoded as (q - 7) * scale like mlc_llm's"
	}
	return "mse: per group of 32, the scale with the least squared error over codes 0-15, decoded as (q - 7) * scale like mlc_llm's"
}
