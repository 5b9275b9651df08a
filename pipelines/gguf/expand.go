package gguf

import (
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/steps"

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
		Params: steps.Params{"outtype": "f16"}}, t.Name)
	baseline := add(&plan.Step{ID: BaselineStepID, Kind: "perplexity", Needs: []string{f16.ID},
		Params: pplParams(ppl, "baseline"), Data: map[string]string{"eval": r.Data.Eval}}, t.Name)
	// The baseline is only comparable to converted models scored with the
	// same context and chunks; a target asking for another context gets
	// its own baseline.
	if !plan.SameEval(baseline.Params, pplParams(ppl, "baseline")) {
		baseline = add(&plan.Step{ID: fmt.Sprintf("%s@c%d", BaselineStepID, ppl.Context), Kind: "perplexity",
			Needs: []string{f16.ID}, Params: pplParams(ppl, "baseline"),
			Data: map[string]string{"eval": r.Data.Eval}}, t.Name)
	}

	typ := strings.ToLower(f.GGUFType)
	model := f16
	if typ != "f16" {
		imatrix := t.Options.(*Options).Imatrix
		qid := "gguf-quantize:" + typ
		needs := []string{f16.ID}
		params := steps.Params{"type": f.GGUFType}
		if imatrix {
			im := add(&plan.Step{ID: "imatrix:calibration", Kind: "imatrix", Needs: []string{f16.ID},
				Params: steps.Params{"context": ppl.Context},
				Data:   map[string]string{"calibration": r.Data.Calibration}}, t.Name)
			needs = append(needs, im.ID)
			qid += "+imatrix"
		}
		model = add(&plan.Step{ID: qid, Kind: "gguf-quantize", Needs: needs, Params: params}, t.Name)
	}
	// The F16 GGUF must score like the checkpoint it came from (same tokens,
	// same chunks, through transformers), or every type made from it
	// inherits a conversion or tokenizer bug.
	hfBase := add(&plan.Step{ID: plan.HFBaselineStepID, Kind: "hf-perplexity", Needs: []string{plan.SourceStepID},
		Params: steps.Params{"context": ppl.Context, "max_chunks": ppl.MaxChunks},
		Data:   map[string]string{"eval": r.Data.Eval}}, t.Name)
	consistent := add(&plan.Step{ID: "compare-perplexity:f16", Kind: "compare-perplexity",
		Needs: []string{baseline.ID, hfBase.ID}, Params: steps.Params{"max_rel_diff": DefaultMaxRelDiff}}, t.Name)

	pid := "perplexity:" + model.ID[strings.Index(model.ID, ":")+1:]
	if baseline.ID != BaselineStepID {
		pid += fmt.Sprintf("@c%d", ppl.Context)
	}
	conv := add(&plan.Step{ID: pid, Kind: "perplexity", Needs: []string{model.ID, baseline.ID},
		Params: pplParams(ppl, "converted"), Data: map[string]string{"eval": r.Data.Eval}}, t.Name)
	return model, []string{conv.ID, consistent.ID}
}

func pplParams(g recipe.PerplexityGate, role string) steps.Params {
	return steps.Params{"context": g.Context, "max_chunks": g.MaxChunks, "role": role}
}
