package edge

import (
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/pipelines/shared"
)

// TargetFit is the plan-time prediction for one target: the memory
// pre-flight, the decode ceiling and its budgets, with notes on what was
// assumed or could not be checked. Publish records its ManifestMemoryFit
// and ManifestBudgets.
type TargetFit struct {
	Target string `json:"target"`
	Prediction
}

// Preflight checks every target before any work runs: that the model, its
// KV cache for the target's context and the runtime fit in what the device
// leaves to apps (and under max_memory_gb), and that min_tokens_per_s is
// under the decode ceiling. A target that cannot work is a Diagnostic at
// the target, whose hint gives the fixes with their numbers. What plan time
// cannot know (a model downloaded at run time, time to first token) is a
// note on the TargetFit, not an error.
func Preflight(r *recipe.Recipe) (recipe.Diagnostics, []TargetFit) {
	return PreflightModel(r, RecipeModel(r))
}

// RecipeModel is what plan time knows of a recipe's model (nothing for an
// image classifier, whose shape the pre-flight does not use).
func RecipeModel(r *recipe.Recipe) Model {
	if !r.Traits().Generates {
		return Model{Source: r.Model.Source}
	}
	return ResolveModel(r.Model.Source, r.Dir())
}

// PreflightModel is Preflight for a model already resolved.
func PreflightModel(r *recipe.Recipe, model Model) (recipe.Diagnostics, []TargetFit) {
	if !r.Traits().Generates {
		// Weights, KV cache and decode ceilings are an LLM's; an image
		// classifier's memory and latency are not predicted yet.
		return LocalSourceProblems(r), nil
	}
	var diags recipe.Diagnostics
	if len(model.Problems) > 0 {
		for _, p := range model.Problems {
			if !strings.HasPrefix(p, "model.source") {
				p = "model.source: " + p
			}
			diags = append(diags, recipe.Diagnostic{Pos: r.Model.SourcePos, Msg: p})
		}
		return diags, nil
	}
	// After the shape, whose reader says more precisely what is wrong
	// with a config.json that is a FIFO or far too large.
	if diags := LocalSourceProblems(r); len(diags) > 0 {
		return diags, nil
	}
	if a := model.Architecture; a != "" && !shared.CausalLM(a) && !r.Model.TrustRemoteCode {
		return recipe.Diagnostics{{Pos: r.Model.SourcePos,
			Msg:  fmt.Sprintf("model.source: %s is a %s model, which %s does not load as a language model; every target scores the unconverted model through it", r.Model.Source, a, shared.TransformersPinned()),
			Hint: "use a checkpoint of an architecture transformers knows (llama, qwen2, qwen3, gemma3_text, phi3, mistral, mixtral, qwen3_moe, ...); a model that ships its own code needs model.trust_remote_code: true, and runs that code"}}, nil
	}
	fits := make([]TargetFit, 0, len(r.Targets))
	for _, t := range r.Targets {
		pred := Predict(model, Request{
			Device: t.Device, Format: t.Format, Context: t.Context, KVDtype: t.KVDtype,
			MinTokensPerS: t.MinTokensPerS, MaxMemoryGB: t.MaxMemoryGB, MaxFirstTokenMS: t.MaxFirstTokenMS,
		})
		if model.MaxContext > 0 && t.Context > model.MaxContext {
			pos := t.ContextPos
			if pos.Line == 0 {
				pos = t.Pos
			}
			diags = append(diags, recipe.Diagnostic{Pos: pos,
				Msg:  fmt.Sprintf("target %q: context %d is beyond what the model supports: %s has max_position_embeddings %d", t.Name, t.Context, r.Model.Source, model.MaxContext),
				Hint: fmt.Sprintf("use context: %d or less: the model was not trained for longer sequences", model.MaxContext)})
		}
		for _, prob := range pred.Problems {
			diags = append(diags, recipe.Diagnostic{Pos: t.Pos, Msg: fmt.Sprintf("target %q: %s", t.Name, prob.Msg), Hint: prob.Hint})
		}
		fits = append(fits, TargetFit{Target: t.Name, Prediction: pred})
	}
	diags.Sort()
	return diags, fits
}
