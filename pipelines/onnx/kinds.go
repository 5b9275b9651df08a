package onnx

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/pipelines/onnx/report"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// onnxExport exports a Hugging Face checkpoint to an fp32 ONNX graph with
// optimum-onnx (onnx_export.py): with a KV cache for ONNX targets, or
// without one (past: false) as the prefill graph QNN's static-shape flow
// starts from.
type onnxExport struct{}

// onnxQuantize turns the fp32 export's MatMul weights into 4-bit
// MatMulNBits blocks with ONNX Runtime's weight-only quantizer.
type onnxQuantize struct{}

// onnxValidate runs an ONNX model on ONNX Runtime's CPU provider: its
// logits against PyTorch's on the same tokens (a gate: over the threshold
// fails the target), and its perplexity with the hf-perplexity baseline's
// tokens and chunks.
type onnxValidate struct{}

// MinONNXOpset is the oldest opset edgepipe exports: LayerNormalization
// and the attention patterns ONNX Runtime fuses need 17.
const MinONNXOpset = 17

func (onnxExport) Name() string { return "onnx-export" }
func (onnxExport) Version() int { return 1 }

// ExportParams are an onnx-export step's.
type ExportParams struct {
	Opset int `json:"opset"`
	// Past exports the KV cache (ONNX targets); without it, the prefill
	// graph QNN's static-shape flow starts from.
	Past bool `json:"past"`
}

func (onnxExport) NewParams() any     { return &ExportParams{} }
func (onnxExport) Tools(any) []string { return []string{ToolExport} }
func (onnxExport) Resources(any) steps.Resources {
	// The TorchScript exporter holds the fp32 model, its trace and the
	// serialized graph at once (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 785, ModelFactor: 8.07}
}

func (onnxExport) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[ExportParams](sc.Params)
	opset := p.Opset
	if opset < MinONNXOpset {
		return fmt.Errorf("onnx-export: opset %d is too old: use %d or newer", opset, MinONNXOpset)
	}
	past := p.Past
	args := []string{"--model", src.Dir, "--out", sc.Out, "--opset", strconv.Itoa(opset)}
	if !past {
		args = append(args, "--no-past")
	}
	if err := sc.RunTool(ctx, ToolExport, args...); err != nil {
		return err
	}
	var res report.Export
	if err := steps.ReadReport(ToolExport, sc.LogPath, &res); err != nil {
		return err
	}
	if err := CheckFile(filepath.Join(sc.Out, res.Model)); err != nil {
		return err
	}
	// Check what the exporter really wrote, not what was asked for.
	if res.Opset < MinONNXOpset {
		return fmt.Errorf("onnx-export: the exported graph has opset %d, older than %d", res.Opset, MinONNXOpset)
	}
	if past && res.KVLayers == 0 {
		return fmt.Errorf("onnx-export: the exported graph has no past_key_values inputs, but a KV cache was asked for (see %s)", sc.LogPath)
	}
	if !contains(res.Outputs, "logits") {
		return fmt.Errorf("onnx-export: the exported graph has no logits output (outputs: %v)", res.Outputs)
	}
	sc.Result.SetFile("model", res.Model)
	sc.Result.SetMetric("opset", float64(res.Opset))
	sc.Result.SetFact("kv_cache", strconv.FormatBool(res.KVLayers > 0))
	if res.KVLayers > 0 {
		sc.Result.SetMetric("kv_layers", float64(res.KVLayers))
	}
	sc.Result.SetFact("inputs", strings.Join(res.Inputs, ","))
	return nil
}

func (onnxQuantize) Name() string { return "onnx-quantize" }
func (onnxQuantize) Version() int { return 3 }

// QuantizeParams are an onnx-quantize step's.
type QuantizeParams struct {
	Method     string `json:"method"`
	BlockSize  int    `json:"block_size"`
	Symmetric  bool   `json:"symmetric"`
	KeepLMHead bool   `json:"keep_lm_head"`
	// LMHeadBits is the output projection's width when it is quantized;
	// 0 (steps planned before it existed) means 4, like the rest.
	LMHeadBits int `json:"lm_head_bits,omitempty"`
	// VDownBits is the value and down projections' width; 0 means 4.
	VDownBits int `json:"v_down_bits,omitempty"`
}

func (onnxQuantize) NewParams() any     { return &QuantizeParams{} }
func (onnxQuantize) Tools(any) []string { return []string{ToolQuantize} }
func (onnxQuantize) Resources(any) steps.Resources {
	// The fp32 graph in memory plus the packed copy it builds; the peak
	// follows the largest tensor it packs (docs/results/memory-weights.md).
	return steps.Resources{Cores: 1, MemoryMB: 524, TensorFactor: 14.3}
}

// DefaultONNXBlockSize is the MatMulNBits block: 32 divides every width of
// the built-in model (576 = 18 x 32, 1536 = 48 x 32), 128 does not.
const DefaultONNXBlockSize = 32

func (onnxQuantize) Run(ctx context.Context, sc *steps.Context) error {
	fp32, err := sc.Input(onnxExport{})
	if err != nil {
		return err
	}
	p := steps.ParamsOf[QuantizeParams](sc.Params)
	bs := p.BlockSize
	if bs < 16 || bs&(bs-1) != 0 {
		return fmt.Errorf("onnx-quantize: block_size %d is not a power of two of at least 16, which MatMulNBits needs: use 16, 32, 64 or 128 (one that divides the model's widths)", bs)
	}
	method := p.Method
	if method != MethodHQQ && method != MethodRTN {
		return fmt.Errorf("onnx-quantize: method must be %s or %s, not %q", MethodHQQ, MethodRTN, method)
	}
	// The script's flags take 4 or 8 only; 0 is a plan from before the
	// option, which means 4.
	for _, b := range []struct {
		name string
		bits int
	}{{"lm_head_bits", p.LMHeadBits}, {"v_down_bits", p.VDownBits}} {
		if b.bits != 0 && b.bits != 4 && b.bits != 8 {
			return fmt.Errorf("onnx-quantize: %s must be 4 or 8, not %d", b.name, b.bits)
		}
	}
	args := []string{"--in", filepath.Join(fp32.Dir, fp32.Result.Files["model"]), "--out", sc.Out, "--block-size", strconv.Itoa(bs),
		"--method", method}
	if method == MethodRTN && !p.Symmetric {
		args = append(args, "--asymmetric")
	}
	if p.KeepLMHead {
		args = append(args, "--keep-lm-head")
	} else if p.LMHeadBits != 0 {
		args = append(args, "--lm-head-bits", strconv.Itoa(p.LMHeadBits))
	}
	if p.VDownBits != 0 {
		args = append(args, "--v-down-bits", strconv.Itoa(p.VDownBits))
	}
	if err := sc.RunTool(ctx, ToolQuantize, args...); err != nil {
		return err
	}
	var res report.Quantize
	if err := steps.ReadReport(ToolQuantize, sc.LogPath, &res); err != nil {
		return err
	}
	if err := CheckFile(filepath.Join(sc.Out, res.Model)); err != nil {
		return err
	}
	if res.MatMulNBits == 0 {
		return fmt.Errorf("onnx-quantize: no MatMul became MatMulNBits (see %s)", sc.LogPath)
	}
	sc.Result.SetFile("model", res.Model)
	sc.Result.SetMetric("block_size", float64(bs))
	sc.Result.SetFact("method", method)
	sc.Result.SetMetric("matmulnbits", float64(res.MatMulNBits))
	sc.Result.SetMetric("matmul_float", float64(res.MatMulFloat))
	if len(res.KeptFP32) > 0 {
		sc.Result.SetFact("kept_fp32", strings.Join(res.KeptFP32, ","))
	}
	switch want := p.LMHeadBits; {
	case res.LMHeadTied:
		// A tied projection reads the embedding's table through a Transpose:
		// no constant for MatMulNBits to pack, at any width.
		sc.Result.SetFact("lm_head", "the output projection stays in float: its weight is the tied embedding's table, read through a Transpose, which MatMulNBits cannot pack")
	case want != 0 && !p.KeepLMHead && res.LMHeadBits != nil && *res.LMHeadBits != want:
		return fmt.Errorf("onnx-quantize: asked for a %d-bit output projection, %s made it %d bits (see %s)", want, ToolQuantize, *res.LMHeadBits, sc.LogPath)
	case res.LMHeadBits != nil && *res.LMHeadBits == 8:
		sc.Result.SetFact("lm_head", "the output projection at 8 bits (round to nearest, a zero point per block of "+strconv.Itoa(bs)+")")
	}
	sc.Result.SetMetric("eight_bit_layers", float64(res.EightBitLayers))
	if p.VDownBits == 8 {
		sc.Result.SetFact("v_down", fmt.Sprintf("%d v_proj and down_proj MatMuls at 8 bits (round to nearest, a zero point per block of %d), the other layers at 4", res.EightBitLayers, bs))
	}
	if len(res.PaddedK) > 0 {
		sc.Result.SetFact("padded", fmt.Sprintf("block %d does not divide K in %v: those blocks are zero-padded", bs, res.PaddedK))
	}
	return nil
}

func (onnxValidate) Name() string { return "onnx-validate" }
func (onnxValidate) Version() int { return 2 }

// ValidateParams are an onnx-validate step's.
type ValidateParams struct {
	steps.Eval
	// MaxAbsLogitDiff is the logits check's limit (the family sets it per
	// format).
	MaxAbsLogitDiff float64 `json:"max_abs_logit_diff"`
}

func (onnxValidate) NewParams() any     { return &ValidateParams{} }
func (onnxValidate) Tools(any) []string { return []string{ToolValidate} }
func (onnxValidate) Resources(any) steps.Resources {
	// ONNX Runtime's session and the PyTorch reference model at once; the
	// logits over the vocabulary weigh most beside the session
	// (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 1425, TensorFactor: 6.13}
}

func (onnxValidate) Run(ctx context.Context, sc *steps.Context) error {
	// The model it scores is its first need (ValidateStep puts it there):
	// an export, a quantized model or a QDQ model.
	if len(sc.Inputs) == 0 || sc.Inputs[0].Result == nil || sc.Inputs[0].Result.Files["model"] == "" {
		return fmt.Errorf("step %s needs, first, the step that made the ONNX model it scores", sc.StepID)
	}
	model := sc.Inputs[0]
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	base, err := sc.Input(shared.HFPerplexity)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[ValidateParams](sc.Params)
	limit := p.MaxAbsLogitDiff
	if math.IsNaN(limit) || limit <= 0 {
		return fmt.Errorf("onnx-validate: max_abs_logit_diff must be a positive number (the pipeline sets it per format)")
	}
	text, err := sc.Data(steps.DataEval)
	if err != nil {
		return err
	}
	ctxLen := p.Chunk
	args := []string{"--onnx", filepath.Join(model.Dir, model.Result.Files["model"]), "--hf", src.Dir,
		"--text", text, "--ctx", strconv.Itoa(ctxLen)}
	if n := p.MaxChunks; n > 0 {
		args = append(args, "--chunks", strconv.Itoa(n))
	}
	// Per-token scores for the delta's interval, and the KL divergence
	// and top-1 agreement against the baseline's top tokens.
	args = append(args, "--scores-out", sc.Out, "--baseline-scores", base.Dir)
	if err := sc.RunTool(ctx, ToolValidate, args...); err != nil {
		return err
	}
	var res report.Validate
	if err := steps.ReadReport(ToolValidate, sc.LogPath, &res); err != nil {
		return err
	}
	if !res.Ran() {
		return fmt.Errorf("%s reported no logits comparison (see %s)", ToolValidate, sc.LogPath)
	}
	pp, err := shared.AgainstBaseline(base, ToolValidate, sc.LogPath, shared.Scored{PPL: res.PPL, Tokens: res.Scored, Chunks: res.Chunks, Ctx: res.Ctx,
		KLDivergence: res.KLDivergence, Top1Agreement: res.BaselineTop1, Out: sc.Out},
		"onnxruntime "+strings.Join(res.Providers, ","))
	if err != nil {
		return err
	}
	diff := *res.MaxAbs
	sc.Result.Checks = append(sc.Result.Checks, steps.Check{
		Name:   "logits-vs-pytorch",
		Passed: !math.IsNaN(diff) && diff <= limit,
		Detail: fmt.Sprintf("max |logit difference| against PyTorch over %d positions is %.4g (limit %.4g; mean %.4g, same top-1 token %.1f%%)",
			*res.Positions, diff, limit, *res.MeanAbs, 100**res.Top1),
	})
	sc.Result.Perplexity = pp
	sc.Result.SetMetric("max_abs_logit_diff", diff)
	sc.Result.SetMetric("max_abs_logit_diff_limit", limit)
	sc.Result.SetMetric("mean_abs_logit_diff", *res.MeanAbs)
	sc.Result.SetMetric("logits_top1_agreement", *res.Top1)
	return nil
}

// CheckFile refuses an output that cannot be an ONNX model, so a tool
// that exits 0 without writing its graph never reaches the cache. A
// serialized ModelProto starts with field 1 (ir_version, a varint): 0x08.
func CheckFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("the tool exited 0 but wrote no %s", filepath.Base(path))
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.Read(b); err != nil || b[0] != 0x08 {
		return fmt.Errorf("%s is not an ONNX model (it does not start with an ir_version field)", filepath.Base(path))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
