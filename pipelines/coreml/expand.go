package coreml

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/steps"
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
	n := t.Context
	if n <= 0 {
		n = 4096
	}
	kv := "stateful"
	if o := t.Options.(*Options); o.KVCache != nil {
		kv = *o.KVCache
	}
	block := f.BlockSize
	suffix := fmt.Sprintf("int4@c%d", n)
	if kv != "stateful" {
		suffix += "+kv=" + kv
	}
	conv := add(&plan.Step{ID: "coreml-convert:" + suffix, Kind: "coreml-convert", Needs: []string{plan.SourceStepID},
		Params: steps.Params{"context": n, "block_size": block, "kv_cache": kv}}, t.Name)
	ppl := t.Quality.Perplexity
	vid := "coreml-validate:" + suffix
	if ppl.Context != 0 && ppl.Context != 512 || ppl.MaxChunks != 0 {
		vid += fmt.Sprintf("/eval-c%dn%d", ppl.Context, ppl.MaxChunks)
	}
	val := add(&plan.Step{ID: vid, Kind: "coreml-validate", Needs: []string{conv.ID, plan.SourceStepID},
		Params: steps.Params{"context": ppl.Context, "max_chunks": ppl.MaxChunks, "block_size": block},
		Data:   map[string]string{"eval": r.Data.Eval}}, t.Name)
	return conv, []string{val.ID}
}
