package coreml

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/pipelines/coreml/report"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// coremlConvert turns a Hugging Face checkpoint into a Core ML ML program
// (iOS 18, FP16 compute) with INT4 per-block weights, with coremltools.
type coremlConvert struct{}

// coremlValidate checks the package without Core ML's runtime (which is
// macOS-only): structurally, and by the perplexity of the same
// quantization applied to the PyTorch model; on macOS it also runs it.
type coremlValidate struct{}

// Tool names, as the coreml toolchain provides them.
const (
	ToolCoreMLConvert  = "coreml_convert.py"
	ToolCoreMLValidate = "coreml_validate.py"
)

// CoreMLPackage is the name of the converted package inside the step output.
const CoreMLPackage = "model.mlpackage"

// Where coreml_validate.py's per-token scores lie in the step's output:
// the simulated INT4 model's at the top, the unconverted model's (its own
// baseline) and Core ML's in these folders.
const (
	ScoresBaseline = "baseline"
	ScoresCoreML   = "coreml"
)

func (coremlConvert) Name() string { return "coreml-convert" }
func (coremlConvert) Version() int { return 4 }

// ConvertParams are a coreml-convert step's.
type ConvertParams struct {
	// Context is the target's context: Core ML models are built for one.
	Context int    `json:"context"`
	KVCache string `json:"kv_cache"`
	Weights
}

// Weights is how the package stores its weights; the validation step
// checks the package against the same.
type Weights struct {
	BlockSize          int    `json:"block_size"`
	Mode               string `json:"mode"`
	QuantizeEmbeddings bool   `json:"quantize_embeddings"`
	// VDownBits is the value and down projections' width (4 or 8); 0
	// means 4, so packages made before the option keep their keys.
	VDownBits int `json:"v_down_bits,omitempty"`
}

// args are the weight flags both scripts take.
func (w Weights) args() ([]string, error) {
	if w.Mode != ModeAffine && w.Mode != ModeSymmetric {
		return nil, fmt.Errorf("mode must be %s or %s, not %q", ModeAffine, ModeSymmetric, w.Mode)
	}
	if w.VDownBits != 0 && w.VDownBits != 4 && w.VDownBits != 8 {
		return nil, fmt.Errorf("v_down_bits must be 4 or 8, not %d", w.VDownBits)
	}
	args := []string{"--block-size", strconv.Itoa(w.BlockSize), "--mode", w.Mode}
	if w.VDownBits == 8 {
		args = append(args, "--v-down-bits", "8")
	}
	if w.QuantizeEmbeddings {
		args = append(args, "--quantize-embeddings")
	}
	return args, nil
}

// describe says in words what the weights are, for the manifest.
func (w Weights) describe() string {
	embed := "the token embedding and output projection stay fp16"
	if w.QuantizeEmbeddings {
		embed = "the token embedding and output projection too"
	}
	vdown := ""
	if w.VDownBits == 8 {
		vdown = "; every layer's v_proj and down_proj 8-bit on the same layout"
	}
	if w.Mode == ModeAffine {
		return fmt.Sprintf("int4 per block of %d: uint4 codes, an fp16 scale and an fp16 offset per block (constexpr_blockwise_shift_scale)%s; %s", w.BlockSize, vdown, embed)
	}
	return fmt.Sprintf("int4 linear_symmetric per block of %d%s; %s", w.BlockSize, vdown, embed)
}

func (coremlConvert) NewParams() any     { return &ConvertParams{} }
func (coremlConvert) Tools(any) []string { return []string{ToolCoreMLConvert} }
func (coremlConvert) Resources(any) steps.Resources {
	// torch holds the fp32 model and its trace, coremltools a second copy
	// of the graph while it converts and quantizes; coremltools' peak
	// follows the largest tensor (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 1752, TensorFactor: 10.4}
}

func (coremlConvert) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[ConvertParams](sc.Params)
	n := p.Context
	if n < 2 {
		return fmt.Errorf("coreml-convert: the target needs a context (tokens) to build the Core ML model for, got %d", n)
	}
	kv := p.KVCache
	if kv != "stateful" && kv != "none" {
		return fmt.Errorf("coreml-convert: kv_cache must be stateful or none, not %q", kv)
	}
	wargs, err := p.Weights.args()
	if err != nil {
		return fmt.Errorf("coreml-convert: %w", err)
	}
	args := append([]string{"--model", src.Dir, "--out", filepath.Join(sc.Out, CoreMLPackage),
		"--context", strconv.Itoa(n), "--kv-cache", kv,
		"--threads", strconv.Itoa(sc.NumThreads())}, wargs...)
	if err := sc.RunTool(ctx, ToolCoreMLConvert, args...); err != nil {
		return err
	}
	var res report.Convert
	if err := steps.ReadReport(ToolCoreMLConvert, sc.LogPath, &res); err != nil {
		return err
	}
	sc.Result.SetFile("model", CoreMLPackage)
	sc.Result.SetFact("kv_cache", res.KVCache+" ("+res.KVCacheReason+")")
	sc.Result.SetFact("compute_precision", "float16")
	sc.Result.SetFact("inputs", strings.Join(res.Inputs, ", "))
	if w := res.SlidingWindow; w != nil && *w > 0 {
		sc.Result.SetFact("sliding_window", fmt.Sprintf("%d tokens: the sliding-attention layers read the sliding_mask input, which masks keys %d or more positions behind the query", *w, *w))
	}
	sc.Result.SetFact("minimum_deployment_target", "iOS18")
	sc.Result.SetFact("weights", p.Weights.describe())
	if res.CoreMLTools != "" {
		sc.Result.SetFact("coremltools", res.CoreMLTools+" (torch "+res.Torch+")")
	}
	sc.Result.SetMetric("context", float64(n))
	sc.Result.SetMetric("convert_s", res.ConvertS)
	sc.Result.SetMetric("quantize_s", res.QuantizeS)
	if p.VDownBits == 8 {
		v := fmt.Sprintf("%d v_proj and down_proj weights at 8 bits on the same per-block layout, the others at 4", res.EightBit)
		if res.EightBit == 0 {
			v = "none: no weight of this model is named like a v_proj or down_proj, so every weight is 4-bit"
		}
		sc.Result.SetFact("v_down", v)
		sc.Result.SetMetric("eight_bit_weights", float64(res.EightBit))
	}
	// The package holds the program and its weights only: an app needs
	// the tokenizer, the stop set and the chat template beside it (the
	// behavioural contract checks them there).
	if _, err := shared.CopyTokenizerFiles(src.Dir, sc.Out); err != nil {
		return err
	}
	return nil
}

func (coremlValidate) Name() string { return "coreml-validate" }
func (coremlValidate) Version() int { return 4 }

// ValidateParams are a coreml-validate step's.
type ValidateParams struct {
	steps.Eval
	Weights
}

func (coremlValidate) NewParams() any     { return &ValidateParams{} }
func (coremlValidate) Tools(any) []string { return []string{ToolCoreMLValidate} }
func (coremlValidate) Resources(any) steps.Resources {
	// Two fp32 copies of the model (unconverted and simulated INT4) and
	// the package's weights read back.
	// On macOS the Core ML model itself is scored too
	// (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 442, ModelFactor: 2.92, Host: steps.HostNeeds{PrefersMacOS: true}}
}

func (coremlValidate) Run(ctx context.Context, sc *steps.Context) error {
	pkg, err := sc.Input(coremlConvert{})
	if err != nil {
		return err
	}
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	text, err := sc.Data(steps.DataEval)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[ValidateParams](sc.Params)
	wargs, err := p.Weights.args()
	if err != nil {
		return fmt.Errorf("coreml-validate: %w", err)
	}
	args := append([]string{"--package", filepath.Join(pkg.Dir, pkg.Result.Files["model"]), "--model", src.Dir,
		"--text", text, "--ctx", strconv.Itoa(p.Chunk),
		"--threads", strconv.Itoa(sc.NumThreads())}, wargs...)
	if n := p.MaxChunks; n > 0 {
		args = append(args, "--chunks", strconv.Itoa(n))
	}
	// It scores its own baseline (not hf-perplexity's): it keeps both
	// models' per-token scores for the delta's interval.
	args = append(args, "--scores-out", sc.Out)
	if err := sc.RunTool(ctx, ToolCoreMLValidate, args...); err != nil {
		return err
	}
	var res report.Validate
	if err := steps.ReadReport(ToolCoreMLValidate, sc.LogPath, &res); err != nil {
		return err
	}
	if len(res.Checks) == 0 {
		return fmt.Errorf("%s reported no checks (see %s)", ToolCoreMLValidate, sc.LogPath)
	}
	for _, c := range res.Checks {
		sc.Result.Checks = append(sc.Result.Checks, steps.Check{Name: c.Name, Passed: c.Passed, Detail: c.Detail})
	}
	if !(res.PPL > 0) || !(res.BaselinePPL > 0) {
		return fmt.Errorf("%s reported perplexity %v against baseline %v: no usable probabilities (see %s)",
			ToolCoreMLValidate, res.PPL, res.BaselinePPL, sc.LogPath)
	}
	// On macOS the Core ML model itself is scored; that number is the one
	// the gate judges. Elsewhere it is the simulated quantization.
	ppl, kl, top1, scores := res.PPL, res.KLDivergence, res.Top1Agreement, sc.Out
	backend := "transformers, " + res.Simulated + ", " + res.Compute
	if res.RanCoreML && res.CoreMLPPL != nil && *res.CoreMLPPL > 0 {
		ppl, kl, top1, scores = *res.CoreMLPPL, res.CoreMLKLDivergence, res.CoreMLTop1Agreement, filepath.Join(sc.Out, ScoresCoreML)
		sc.Result.SetMetric("simulated_ppl", res.PPL)
		backend = "Core ML (" + res.Compute + ")"
	}
	pp := &steps.Perplexity{PPL: ppl, Baseline: res.BaselinePPL, EvalTokens: res.Scored,
		Chunks: res.Chunks, Context: res.Ctx, Backend: backend, KLDivergence: kl, Top1Agreement: top1}
	own := steps.Input{StepID: sc.StepID + " (its own baseline)", Dir: filepath.Join(sc.Out, ScoresBaseline)}
	if err := shared.Interval(own, scores, pp); err != nil {
		return fmt.Errorf("%s: %w", ToolCoreMLValidate, err)
	}
	sc.Result.Perplexity = pp
	sc.Result.SetMetric("quantized_weights", float64(res.QuantizedWeights))
	sc.Result.SetMetric("package_bytes", float64(res.PackageBytes))
	ran := "no: " + res.CoreMLReason
	if res.RanCoreML {
		ran = "yes"
	}
	sc.Result.SetFact("coreml_prediction", ran)
	return nil
}
