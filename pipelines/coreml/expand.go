package coreml

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// expandCoreML: source -> coreml-convert (one package per context: the
// context is built into the model) -> coreml-validate (structure, and the
// package's INT4 weights scored in PyTorch against the unconverted model on
// the same tokens; on macOS, the Core ML model itself).
//
// The baseline is computed inside coreml-validate, in the coreml
// toolchain's torch, so both numbers come from one backend and one
// tokenization.
func expandCoreML(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
	n := plan.TargetContext(t)
	o := t.Options.(*Options)
	kv := plan.Or(o.KVCache, "stateful")
	w := Weights{BlockSize: f.BlockSize, Mode: plan.Or(o.Mode, ModeAffine), QuantizeEmbeddings: plan.Or(o.QuantizeEmbeddings, false),
		VDownBits: plan.Or(o.VDownBits, DefaultVDownBits)}
	suffix := fmt.Sprintf("int4@c%d", n)
	if kv != "stateful" {
		suffix += "+kv=" + kv
	}
	suffix += plan.OptionSuffix(o, "mode", "quantize_embeddings", "v_down_bits")
	conv := add(&plan.Step{ID: "coreml-convert:" + suffix, Kind: "coreml-convert", Needs: []string{plan.SourceStepID},
		Params: &ConvertParams{Context: n, KVCache: kv, Weights: w}}, t.Name)
	ppl := t.Quality.Perplexity
	vid := "coreml-validate:" + suffix
	if ppl.Context != 0 && ppl.Context != 512 || ppl.MaxChunks != 0 {
		vid += fmt.Sprintf("/eval-c%dn%d", ppl.Context, ppl.MaxChunks)
	}
	val := add(&plan.Step{ID: vid, Kind: "coreml-validate", Needs: []string{conv.ID, plan.SourceStepID},
		Params: &ValidateParams{Eval: plan.EvalOf(ppl), Weights: w}, Data: plan.EvalData(r)}, t.Name)
	return conv, []string{val.ID}
}
