package onnx

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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

// onnxModelFile is the graph's file name in every ONNX step's output.
const onnxModelFile = "model.onnx"

func (onnxExport) Name() string                { return "onnx-export" }
func (onnxExport) Version() int                { return 1 }
func (onnxExport) Tools(steps.Params) []string { return []string{ToolExport} }
func (onnxExport) Resources(steps.Params) steps.Resources {
	// The TorchScript exporter holds the fp32 model, its trace and the
	// serialized graph at once: about 2.5 GB for 135M parameters.
	return steps.Resources{Cores: 2, MemoryMB: 4096}
}

func (onnxExport) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input("fetch")
	if err != nil {
		return err
	}
	opset := sc.Params.Int("opset", 18)
	if opset < MinONNXOpset {
		return fmt.Errorf("onnx-export: opset %d is too old: use %d or newer", opset, MinONNXOpset)
	}
	past := sc.Params.Bool("past", true)
	args := []string{"--model", src.Dir, "--out", sc.Out, "--opset", strconv.Itoa(opset)}
	if !past {
		args = append(args, "--no-past")
	}
	if err := sc.RunTool(ctx, ToolExport, args...); err != nil {
		return err
	}
	var res struct {
		Model    string   `json:"model"`
		Opset    int      `json:"opset"`
		Inputs   []string `json:"inputs"`
		Outputs  []string `json:"outputs"`
		KVLayers int      `json:"kv_layers"`
		KVCache  bool     `json:"kv_cache"`
	}
	if err := steps.ReadJSONLine(sc.LogPath, &res); err != nil {
		return fmt.Errorf("%s: %w", ToolExport, err)
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

func (onnxQuantize) Name() string                { return "onnx-quantize" }
func (onnxQuantize) Version() int                { return 1 }
func (onnxQuantize) Tools(steps.Params) []string { return []string{ToolQuantize} }
func (onnxQuantize) Resources(steps.Params) steps.Resources {
	// The fp32 graph in memory plus the packed copy it builds.
	return steps.Resources{Cores: 1, MemoryMB: 3072}
}

// DefaultONNXBlockSize is the MatMulNBits block: 32 divides every width of
// the built-in model (576 = 18 x 32, 1536 = 48 x 32), 128 does not.
const DefaultONNXBlockSize = 32

func (onnxQuantize) Run(ctx context.Context, sc *steps.Context) error {
	fp32, err := sc.Input("onnx-export")
	if err != nil {
		return err
	}
	bs := sc.Params.Int("block_size", DefaultONNXBlockSize)
	if bs < 16 || bs&(bs-1) != 0 {
		return fmt.Errorf("onnx-quantize: block_size %d is not a power of two of at least 16, which MatMulNBits needs: use 16, 32, 64 or 128 (one that divides the model's widths)", bs)
	}
	args := []string{"--in", filepath.Join(fp32.Dir, fp32.Result.Files["model"]), "--out", sc.Out, "--block-size", strconv.Itoa(bs)}
	if !sc.Params.Bool("symmetric", true) {
		args = append(args, "--asymmetric")
	}
	if sc.Params.Bool("keep_lm_head", false) {
		args = append(args, "--keep-lm-head")
	}
	if err := sc.RunTool(ctx, ToolQuantize, args...); err != nil {
		return err
	}
	var res struct {
		Model       string   `json:"model"`
		MatMulNBits int      `json:"matmulnbits"`
		MatMulFloat int      `json:"matmul_float"`
		PaddedK     []int    `json:"padded_k"`
		KeptFP32    []string `json:"kept_fp32"`
	}
	if err := steps.ReadJSONLine(sc.LogPath, &res); err != nil {
		return fmt.Errorf("%s: %w", ToolQuantize, err)
	}
	if err := CheckFile(filepath.Join(sc.Out, res.Model)); err != nil {
		return err
	}
	if res.MatMulNBits == 0 {
		return fmt.Errorf("onnx-quantize: no MatMul became MatMulNBits (see %s)", sc.LogPath)
	}
	sc.Result.SetFile("model", res.Model)
	sc.Result.SetMetric("block_size", float64(bs))
	sc.Result.SetMetric("matmulnbits", float64(res.MatMulNBits))
	sc.Result.SetMetric("matmul_float", float64(res.MatMulFloat))
	if len(res.KeptFP32) > 0 {
		sc.Result.SetFact("kept_fp32", strings.Join(res.KeptFP32, ","))
	}
	if len(res.PaddedK) > 0 {
		sc.Result.SetFact("padded", fmt.Sprintf("block %d does not divide K in %v: those blocks are zero-padded", bs, res.PaddedK))
	}
	return nil
}

func (onnxValidate) Name() string                { return "onnx-validate" }
func (onnxValidate) Version() int                { return 1 }
func (onnxValidate) Tools(steps.Params) []string { return []string{ToolValidate} }
func (onnxValidate) Resources(steps.Params) steps.Resources {
	// ONNX Runtime's session and the PyTorch reference model at once.
	return steps.Resources{Cores: 2, MemoryMB: 4096}
}

// onnxModelKinds are the kinds whose output onnx-validate scores, in the
// order it looks for them.
var onnxModelKinds = []string{"qnn-qdq", "onnx-quantize", "onnx-export"}

func (onnxValidate) Run(ctx context.Context, sc *steps.Context) error {
	var model steps.Input
	for _, k := range onnxModelKinds {
		if in, err := sc.Input(k); err == nil {
			model = in
			break
		}
	}
	if model.Dir == "" {
		return fmt.Errorf("step %s needs an ONNX model from one of %v", sc.StepID, onnxModelKinds)
	}
	src, err := sc.Input("fetch")
	if err != nil {
		return err
	}
	base, err := sc.Input("hf-perplexity")
	if err != nil {
		return err
	}
	limit := sc.Params.Float("max_abs_logit_diff", math.NaN())
	if math.IsNaN(limit) || limit <= 0 {
		return fmt.Errorf("onnx-validate: max_abs_logit_diff must be a positive number (the pipeline sets it per format)")
	}
	text, err := sc.Data(sc.Params.String("eval", "builtin:eval"))
	if err != nil {
		return err
	}
	ctxLen := sc.Params.Int("context", 512)
	args := []string{"--onnx", filepath.Join(model.Dir, model.Result.Files["model"]), "--hf", src.Dir,
		"--text", text, "--ctx", strconv.Itoa(ctxLen)}
	if n := sc.Params.Int("max_chunks", 0); n > 0 {
		args = append(args, "--chunks", strconv.Itoa(n))
	}
	if err := sc.RunTool(ctx, ToolValidate, args...); err != nil {
		return err
	}
	var res struct {
		PPL          float64  `json:"ppl"`
		Chunks       int      `json:"chunks"`
		Ctx          int      `json:"ctx"`
		Scored       int      `json:"scored"`
		MaxAbs       *float64 `json:"max_abs_logit_diff"`
		MeanAbs      float64  `json:"mean_abs_logit_diff"`
		Top1         float64  `json:"top1_agreement"`
		Positions    int      `json:"logit_positions"`
		ProviderList []string `json:"providers"`
	}
	if err := steps.ReadJSONLine(sc.LogPath, &res); err != nil {
		return fmt.Errorf("%s: %w", ToolValidate, err)
	}
	if res.MaxAbs == nil {
		return fmt.Errorf("%s reported no logits comparison (see %s)", ToolValidate, sc.LogPath)
	}
	// The baseline only compares when it scored the same chunks.
	if bc, bx := base.Result.Metrics["chunks"], base.Result.Metrics["context"]; int(bc) != res.Chunks || int(bx) != res.Ctx {
		return fmt.Errorf("onnx-validate: the baseline %s scored %v chunks of %v tokens, this model %d of %d: they do not compare",
			base.StepID, bc, bx, res.Chunks, res.Ctx)
	}
	bp, ok := base.Result.Metrics["ppl"]
	if !ok {
		return fmt.Errorf("the baseline step %s recorded no perplexity", base.StepID)
	}
	diff := *res.MaxAbs
	sc.Result.Checks = append(sc.Result.Checks, steps.Check{
		Name:   "logits-vs-pytorch",
		Passed: !math.IsNaN(diff) && diff <= limit,
		Detail: fmt.Sprintf("max |logit difference| against PyTorch over %d positions is %.4g (limit %.4g; mean %.4g, same top-1 token %.1f%%)",
			res.Positions, diff, limit, res.MeanAbs, 100*res.Top1),
	})
	if !(res.PPL > 0) || math.IsInf(res.PPL, 0) {
		return fmt.Errorf("%s reported perplexity %v: the model produces no usable probabilities (see %s)", ToolValidate, res.PPL, sc.LogPath)
	}
	sc.Result.SetMetric("ppl", res.PPL)
	sc.Result.SetMetric("baseline_ppl", bp)
	sc.Result.SetMetric("eval_tokens", float64(res.Scored))
	sc.Result.SetMetric("chunks", float64(res.Chunks))
	sc.Result.SetMetric("context", float64(res.Ctx))
	sc.Result.SetMetric("max_abs_logit_diff", diff)
	sc.Result.SetMetric("max_abs_logit_diff_limit", limit)
	sc.Result.SetMetric("mean_abs_logit_diff", res.MeanAbs)
	sc.Result.SetMetric("logits_top1_agreement", res.Top1)
	sc.Result.SetFact("backend", "onnxruntime "+strings.Join(res.ProviderList, ","))
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
