package mlc

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// expandMLC: source -> mlc_llm convert_weight (shared by every context)
// -> mlc_llm gen_config (per context and conversation template) ->
// optionally mlc_llm compile --device webgpu (`with: {compile: true}`) ->
// mlc-validate (the layout against the checkpoint's config).
func expandMLC(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
	q := f.Name[len("mlc-"):]
	n := plan.TargetContext(t)
	tmpl := "chatml"
	opts := t.Options.(*Options)
	if opts.ConvTemplate != nil && *opts.ConvTemplate != "" {
		tmpl = *opts.ConvTemplate
	}
	weights := add(&plan.Step{ID: "mlc-convert-weight:" + q, Kind: "mlc-convert-weight", Needs: []string{plan.SourceStepID},
		Params: &WeightParams{Quantization: q}}, t.Name)
	suffix := fmt.Sprintf("%s@c%d", q, n)
	if tmpl != "chatml" {
		suffix += "+" + tmpl
	}
	model := add(&plan.Step{ID: "mlc-gen-config:" + suffix, Kind: "mlc-gen-config", Needs: []string{weights.ID, plan.SourceStepID},
		Params: &ConfigParams{Quantization: q, Context: n, ConvTemplate: tmpl}}, t.Name)
	if opts.Compile {
		model = add(&plan.Step{ID: "mlc-compile:webgpu/" + suffix, Kind: "mlc-compile", Needs: []string{model.ID},
			Params: &CompileParams{Device: "webgpu"}}, t.Name)
	}
	val := add(&plan.Step{ID: "mlc-validate:" + model.ID, Kind: "mlc-validate", Needs: []string{model.ID, plan.SourceStepID},
		Params: &ValidateParams{Context: n}}, t.Name)
	return model, []string{val.ID}
}
