package gguf

import (
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

// expandGGUF: source -> convert_hf_to_gguf (f16, shared) -> llama-quantize
// (one per GGUF type, shared by targets of that type) -> perplexity against
// the F16 baseline on the same tokens.
func expandGGUF(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
	ppl := t.Quality.Perplexity
	f16 := add(&plan.Step{ID: F16StepID, Kind: "gguf-convert", Needs: []string{plan.SourceStepID},
		Params: &ConvertParams{OutType: "f16"}}, t.Name)
	baseline := add(&plan.Step{ID: BaselineStepID, Kind: "perplexity", Needs: []string{f16.ID},
		Params: pplParams(ppl, RoleBaseline), Data: plan.EvalData(r)}, t.Name)
	// The baseline is only comparable to converted models scored with the
	// same context and chunks; a target asking for another context gets
	// its own baseline.
	if baseline.Params.(*PerplexityParams).Eval != plan.EvalOf(ppl) {
		baseline = add(&plan.Step{ID: fmt.Sprintf("%s@c%d", BaselineStepID, ppl.Context), Kind: "perplexity",
			Needs: []string{f16.ID}, Params: pplParams(ppl, RoleBaseline), Data: plan.EvalData(r)}, t.Name)
	}

	typ := strings.ToLower(f.GGUFType)
	model := f16
	if typ != "f16" {
		imatrix := t.Options.(*Options).Imatrix
		qid := "gguf-quantize:" + typ
		needs := []string{f16.ID}
		params := &QuantizeParams{Type: f.GGUFType}
		if imatrix {
			im := add(&plan.Step{ID: "imatrix:calibration", Kind: "imatrix", Needs: []string{f16.ID},
				Params: &ImatrixParams{Chunk: ppl.Context},
				Data:   plan.CalibrationData(r)}, t.Name)
			needs = append(needs, im.ID)
			qid += "+imatrix"
		}
		model = add(&plan.Step{ID: qid, Kind: "gguf-quantize", Needs: needs, Params: params}, t.Name)
	}
	// The F16 GGUF must score like the checkpoint it came from (same tokens,
	// same chunks, through transformers), or every type made from it
	// inherits a conversion or tokenizer bug.
	hfBase := add(&plan.Step{ID: plan.HFBaselineStepID, Kind: "hf-perplexity", Needs: []string{plan.SourceStepID},
		Params: ptr(plan.EvalOf(ppl)), Data: plan.EvalData(r)}, t.Name)
	consistent := add(&plan.Step{ID: "compare-perplexity:f16", Kind: "compare-perplexity",
		Needs: []string{baseline.ID, hfBase.ID}, Params: &CompareParams{MaxRelDiff: DefaultMaxRelDiff}}, t.Name)

	pid := "perplexity:" + model.ID[strings.Index(model.ID, ":")+1:]
	if baseline.ID != BaselineStepID {
		pid += fmt.Sprintf("@c%d", ppl.Context)
	}
	conv := add(&plan.Step{ID: pid, Kind: "perplexity", Needs: []string{model.ID, baseline.ID},
		Params: pplParams(ppl, RoleConverted), Data: plan.EvalData(r)}, t.Name)
	return model, []string{conv.ID, consistent.ID}
}

func pplParams(g recipe.PerplexityGate, role string) *PerplexityParams {
	return &PerplexityParams{Eval: plan.EvalOf(g), Role: role}
}

func ptr[T any](v T) *T { return &v }
