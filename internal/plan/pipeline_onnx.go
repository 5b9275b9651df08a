package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/steps"
)

func init() { RegisterPipeline("onnx", expandONNX) }

// onnxBaselineID is the transformers perplexity of the unconverted model,
// the baseline of every family scored with hf_perplexity.py's chunking
// (ONNX, QNN, GPTQ, AWQ): the same id in each family's file makes one step.
const onnxBaselineID = "hf-perplexity:baseline"

// Default max |logit difference| against PyTorch, per format, over the
// first evaluation chunk of the built-in model (its logits span about
// +-30). Measured here at context 256:
//   - fp32: 6.5e-5 (kernel rounding only). 1e-2 leaves two orders of
//     magnitude for other CPUs and thread counts and still catches a wrong
//     graph: a broken mask or a missing layer moves logits by whole units.
//   - int4 (MatMulNBits RTN, block 32): 15.4, mean 2.15, same top-1 70%
//     (block 16: 14.0). 25 passes that with margin and fails a model
//     whose logits are garbage (a broken QDQ graph measured 46-53).
//   - QNN W8A16 QDQ: 8.2, mean 0.74, same top-1 81%. The same graph
//     quantized without keeping the RMSNorm statistics in float measured
//     46 (ppl 112199): 20 separates the two. W4A16 was not measured here;
//     its limit is a guess between the two and should be revisited.
//
// Perplexity, gated separately, is what grades the quantized formats.
var onnxLogitLimits = map[string]float64{
	"onnx-fp32": 1e-2,
	"onnx-int4": 25,
	"qnn-w8a16": 20,
	"qnn-w4a16": 30,
}

// onnxBaseline adds (or shares) the hf-perplexity baseline for the
// target's perplexity settings.
func onnxBaseline(r *recipe.Recipe, t *recipe.Target, add AddFunc) *Step {
	ppl := t.Quality.Perplexity
	params := steps.Params{"context": ppl.Context, "max_chunks": ppl.MaxChunks}
	baseline := add(&Step{ID: onnxBaselineID, Kind: "hf-perplexity", Needs: []string{SourceStepID},
		Params: params, Data: map[string]string{"eval": r.Data.Eval}}, t.Name)
	// A baseline only compares with a model scored on the same context and
	// chunks; a target asking for others gets its own.
	if !sameEval(baseline.Params, params) {
		baseline = add(&Step{ID: fmt.Sprintf("%s@c%dn%d", onnxBaselineID, ppl.Context, ppl.MaxChunks), Kind: "hf-perplexity",
			Needs: []string{SourceStepID}, Params: params, Data: map[string]string{"eval": r.Data.Eval}}, t.Name)
	}
	return baseline
}

// withSuffix copies the target's options named in keys into params and
// spells them in a step id suffix, so targets that differ only in options
// get their own steps instead of silently sharing one.
func withSuffix(t *recipe.Target, keys []string, params steps.Params) string {
	var opts []string
	for _, k := range keys {
		if v, ok := t.With[k]; ok {
			params[k] = v
			opts = append(opts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	sort.Strings(opts)
	if len(opts) == 0 {
		return ""
	}
	return "+" + strings.Join(opts, "+")
}

// onnxExportStep adds (or shares) the fp32 export, with or without the KV
// cache.
func onnxExportStep(t *recipe.Target, past bool, add AddFunc) *Step {
	params := steps.Params{"past": past}
	id := "onnx-export:fp32"
	if !past {
		id = "onnx-export:fp32-prefill"
	}
	id += withSuffix(t, []string{"opset"}, params)
	return add(&Step{ID: id, Kind: "onnx-export", Needs: []string{SourceStepID}, Params: params}, t.Name)
}

// onnxValidateStep adds the ONNX Runtime check of a model step: logits
// against PyTorch (gate) and perplexity against the baseline.
func onnxValidateStep(r *recipe.Recipe, t *recipe.Target, f catalog.Format, model, baseline *Step, add AddFunc) *Step {
	ppl := t.Quality.Perplexity
	params := steps.Params{"context": ppl.Context, "max_chunks": ppl.MaxChunks, "max_abs_logit_diff": onnxLogitLimits[f.Name]}
	suffix := withSuffix(t, []string{"max_abs_logit_diff"}, params)
	id := "onnx-validate:" + model.ID[strings.Index(model.ID, ":")+1:] + suffix
	if baseline.ID != onnxBaselineID {
		id += baseline.ID[len(onnxBaselineID):]
	}
	return add(&Step{ID: id, Kind: "onnx-validate", Needs: []string{model.ID, SourceStepID, baseline.ID},
		Params: params, Data: map[string]string{"eval": r.Data.Eval}}, t.Name)
}

// expandONNX: source -> optimum-onnx export with KV cache (fp32, shared)
// -> MatMulNBits 4-bit (onnx-int4) -> onnx-validate (ONNX Runtime CPU:
// logits against PyTorch as a gate, perplexity against the transformers
// baseline on the same tokens).
func expandONNX(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add AddFunc) (*Step, []string) {
	baseline := onnxBaseline(r, t, add)
	model := onnxExportStep(t, true, add)
	if f.Name == "onnx-int4" {
		params := steps.Params{"block_size": steps.DefaultONNXBlockSize}
		suffix := withSuffix(t, []string{"block_size", "symmetric", "keep_lm_head"}, params)
		model = add(&Step{ID: "onnx-quantize:int4" + strings.TrimPrefix(model.ID, "onnx-export:fp32") + suffix,
			Kind: "onnx-quantize", Needs: []string{model.ID}, Params: params}, t.Name)
	}
	check := onnxValidateStep(r, t, f, model, baseline, add)
	return model, []string{check.ID}
}
