package onnx

import (
	"strings"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// Default max |logit difference| against PyTorch, per format, over the
// first evaluation chunk of the built-in model (its logits span about
// +-30). Measured here at context 256:
//   - fp32: 6.5e-5 (kernel rounding only). 1e-2 leaves two orders of
//     magnitude for other CPUs and thread counts and still catches a wrong
//     graph: a broken mask or a missing layer moves logits by whole units.
//   - int4 (MatMulNBits RTN, block 32): 15.4, mean 2.15, same top-1 70%
//     (block 16: 14.0). 25 passes that with margin and fails a model
//     whose logits are garbage (a broken QDQ graph measured 46-53).
//
// Perplexity, gated separately, is what grades the quantized formats.
var onnxLogitLimits = map[string]float64{
	"onnx-fp32": 1e-2,
	"onnx-int4": 25,
}

// ExportStep adds (or shares) the fp32 export, with or without the KV
// cache.
func ExportStep(t *recipe.Target, past bool, add plan.AddFunc) *plan.Step {
	opts := exportOptions(t)
	params := &ExportParams{Opset: plan.Or(opts.Opset, DefaultOpset), Past: past}
	id := "onnx-export:fp32"
	if !past {
		id = "onnx-export:fp32-prefill"
	}
	id += plan.OptionSuffix(t.Options, "opset")
	return add(&plan.Step{ID: id, Kind: "onnx-export", Needs: []string{plan.SourceStepID}, Params: params}, t.Name)
}

// ValidateStep adds the ONNX Runtime check of a model step: logits
// against PyTorch (a gate: over logitLimit fails the target) and
// perplexity against the baseline.
func ValidateStep(r *recipe.Recipe, t *recipe.Target, logitLimit float64, model, baseline *plan.Step, add plan.AddFunc) *plan.Step {
	ppl := t.Quality.Perplexity
	params := &ValidateParams{Eval: plan.EvalOf(ppl), MaxAbsLogitDiff: plan.Or(exportOptions(t).MaxAbsLogitDiff, logitLimit)}
	suffix := plan.OptionSuffix(t.Options, "max_abs_logit_diff")
	id := "onnx-validate:" + model.ID[strings.Index(model.ID, ":")+1:] + suffix
	if baseline.ID != plan.HFBaselineStepID {
		id += baseline.ID[len(plan.HFBaselineStepID):]
	}
	return add(&plan.Step{ID: id, Kind: "onnx-validate", Needs: []string{model.ID, plan.SourceStepID, baseline.ID},
		Params: params, Data: plan.EvalData(r)}, t.Name)
}

// expandONNX: source -> optimum-onnx export with KV cache (fp32, shared)
// -> MatMulNBits 4-bit (onnx-int4) -> onnx-validate (ONNX Runtime CPU:
// logits against PyTorch as a gate, perplexity against the transformers
// baseline on the same tokens) and onnx-decode (the same model decoded
// token by token through its past key/values, against its prefill and the
// shared generate:reference).
func expandONNX(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
	baseline := plan.HFBaseline(r, t, add)
	model := ExportStep(t, true, add)
	if f.Name == "onnx-int4" {
		o := t.Options.(*Int4Options)
		params := &QuantizeParams{Method: o.method(), BlockSize: plan.Or(o.BlockSize, DefaultONNXBlockSize),
			Symmetric: o.method() == MethodRTN && plan.Or(o.Symmetric, true), KeepLMHead: plan.Or(o.KeepLMHead, false)}
		if !params.KeepLMHead {
			params.LMHeadBits = plan.Or(o.LMHeadBits, DefaultLMHeadBits)
		}
		params.VDownBits = plan.Or(o.VDownBits, DefaultVDownBits)
		suffix := plan.OptionSuffix(t.Options, "method", "block_size", "symmetric", "keep_lm_head", "lm_head_bits", "v_down_bits")
		model = add(&plan.Step{ID: "onnx-quantize:int4" + strings.TrimPrefix(model.ID, "onnx-export:fp32") + suffix,
			Kind: "onnx-quantize", Needs: []string{model.ID}, Params: params}, t.Name)
	}
	check := ValidateStep(r, t, onnxLogitLimits[f.Name], model, baseline, add)
	decode := plan.GenerationCheck(r, t, add, "onnx-decode", model.ID[strings.Index(model.ID, ":")+1:], model.ID)
	return model, []string{check.ID, decode.ID}
}

// DefaultOpset is the opset of the export when a target sets none.
const DefaultOpset = 18

// exportOptions are the export options of any target built on the export
// (an ONNX or a QNN target).
func exportOptions(t *recipe.Target) *ExportOptions {
	switch o := t.Options.(type) {
	case *ExportOptions:
		return o
	case *Int4Options:
		return &o.ExportOptions
	case interface{ Export() *ExportOptions }:
		return o.Export()
	}
	return &ExportOptions{}
}
