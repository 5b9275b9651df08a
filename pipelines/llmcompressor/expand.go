package llmcompressor

import (
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/steps"
)

// llmcBaselineID is the transformers perplexity of the unconverted model.
// The id is shared with the other families scored with hf_perplexity.py's
// chunking (ONNX, QNN), so a recipe computes it once; the name is this
// file's own so the families' files do not collide.
const llmcBaselineID = "hf-perplexity:baseline"

// llmcWith are the target options llmc-quantize takes from `with:`, and
// the short tag each adds to the step id (gptq-w4a16+g64+n16).
var llmcWith = []struct{ key, tag string }{
	{"group_size", "g"}, {"num_calibration_samples", "n"}, {"max_seq_length", "s"}, {"n_grid", "grid"},
}

// expandLLMCompressor: source -> llmc-quantize (GPTQ or AWQ W4A16 on the
// CPU, calibrated on the recipe's calibration text) -> llmc-perplexity,
// gated against the transformers baseline of the unconverted model on the
// same tokens and chunks.
func expandLLMCompressor(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
	ppl := t.Quality.Perplexity
	baseline := add(&plan.Step{ID: llmcBaselineID, Kind: "hf-perplexity", Needs: []string{plan.SourceStepID},
		Params: llmcPPLParams(ppl), Data: map[string]string{"eval": r.Data.Eval}}, t.Name)
	// A baseline only compares with a model scored on the same context and
	// chunks; a target asking for others gets its own.
	if !plan.SameEval(baseline.Params, llmcPPLParams(ppl)) {
		baseline = add(&plan.Step{ID: fmt.Sprintf("%s@c%dn%d", llmcBaselineID, ppl.Context, ppl.MaxChunks), Kind: "hf-perplexity",
			Needs: []string{plan.SourceStepID}, Params: llmcPPLParams(ppl), Data: map[string]string{"eval": r.Data.Eval}}, t.Name)
	}

	// The step id spells every option the target sets, so targets that
	// differ only in options do not share (and silently merge) one step.
	scheme := f.Family
	params := steps.Params{"scheme": scheme}
	var opts []string
	set := plan.SetOptions(t.Options)
	for _, w := range llmcWith {
		if v, ok := set[w.key]; ok {
			params[w.key] = v
			opts = append(opts, fmt.Sprintf("%s%v", w.tag, v))
		}
	}
	suffix := f.Name
	if len(opts) > 0 {
		suffix += "+" + strings.Join(opts, "+")
	}
	model := add(&plan.Step{ID: "llmc-quantize:" + suffix, Kind: "llmc-quantize", Needs: []string{plan.SourceStepID},
		Params: params, Data: map[string]string{"calibration": r.Data.Calibration}}, t.Name)

	pid := "llmc-perplexity:" + suffix
	if baseline.ID != llmcBaselineID {
		pid += baseline.ID[len(llmcBaselineID):]
	}
	check := add(&plan.Step{ID: pid, Kind: "llmc-perplexity", Needs: []string{model.ID, baseline.ID},
		Params: llmcPPLParams(ppl), Data: map[string]string{"eval": r.Data.Eval}}, t.Name)
	return model, []string{check.ID}
}

func llmcPPLParams(g recipe.PerplexityGate) steps.Params {
	return steps.Params{"context": g.Context, "max_chunks": g.MaxChunks}
}
