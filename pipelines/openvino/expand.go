package openvino

import (
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

// ExportStepID is the shared uncompressed export every target compresses.
const ExportStepID = "openvino-export:fp32"

// quantizeWith are the options openvino-quantize takes from with:, and the
// short tag each adds to the step id (openvino-int4+g-1+awq).
var quantizeWith = []struct{ key, tag string }{
	{"mode", ""}, {"group_size", "g"}, {"group_size_fallback", "fallback="}, {"ratio", "r"}, {"all_layers", "all"},
	{"awq", "awq"}, {"scale_estimation", "se"}, {"gptq", "gptq"},
	{"calibration_samples", "n"}, {"calibration_seq_len", "s"},
}

// expand: source -> openvino-export (optimum-intel, fp32 IR with its KV
// cache, shared) -> openvino-quantize (NNCF weight compression) ->
// openvino-validate (OpenVINO's CPU plugin: perplexity against the
// transformers baseline on the same tokens and chunks) and openvino-decode
// (the same IR decoded token by token through the KV cache in its state,
// against its prefill and the shared generate:reference).
func expand(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
	baseline := plan.HFBaseline(r, t, add)
	export := add(&plan.Step{ID: ExportStepID, Kind: "openvino-export", Needs: []string{plan.SourceStepID},
		Params: &ExportParams{TrustRemoteCode: r.Model.TrustRemoteCode}}, t.Name)

	params := quantizeParams(f.Name, t.Options, r.Model.TrustRemoteCode)
	step := &plan.Step{ID: "openvino-quantize:" + quantizeSuffix(f.Name, t.Options), Kind: "openvino-quantize",
		Needs: []string{export.ID}, Params: params}
	if params.dataAware() {
		step.Data = plan.CalibrationData(r)
	}
	model := add(step, t.Name)

	id := "openvino-validate:" + strings.TrimPrefix(model.ID, "openvino-quantize:")
	if baseline.ID != plan.HFBaselineStepID {
		id += baseline.ID[len(plan.HFBaselineStepID):]
	}
	check := add(&plan.Step{ID: id, Kind: "openvino-validate", Needs: []string{model.ID, plan.SourceStepID, baseline.ID},
		Params: &ValidateParams{Eval: plan.EvalOf(t.Quality.Perplexity), Precision: DefaultPrecision}, Data: plan.EvalData(r)}, t.Name)
	decode := plan.GenerationCheck(r, t, add, "openvino-decode", strings.TrimPrefix(model.ID, "openvino-quantize:"), model.ID)
	return model, []string{check.ID, decode.ID}
}

// quantizeParams fills every value of a quantize step, defaults included.
func quantizeParams(format string, opts any, trust bool) *QuantizeParams {
	if o, ok := opts.(*Int8Options); ok {
		return &QuantizeParams{WeightFormat: "int8", Sym: plan.Or(o.Mode, "asym") == "sym", Ratio: 1, TrustRemoteCode: trust}
	}
	o, _ := opts.(*Int4Options)
	if o == nil {
		o = &Int4Options{}
	}
	p := &QuantizeParams{WeightFormat: "int4", Sym: plan.Or(o.Mode, "sym") == "sym",
		GroupSize: plan.Or(o.GroupSize, DefaultGroupSize), GroupSizeFallback: plan.Or(o.GroupSizeFallback, DefaultGroupSizeFallback),
		Ratio: plan.Or(o.Ratio, DefaultRatio), AllLayers: plan.Or(o.AllLayers, false),
		AWQ: plan.Or(o.AWQ, false), ScaleEstimation: plan.Or(o.ScaleEstimation, false), GPTQ: plan.Or(o.GPTQ, false),
		TrustRemoteCode: trust}
	if p.dataAware() {
		p.Samples, p.SeqLen = plan.Or(o.Samples, DefaultSamples), plan.Or(o.SeqLen, DefaultSeqLen)
	}
	return p
}

// quantizeSuffix spells the format and every option a target set, so
// targets that differ only in options do not share one step.
func quantizeSuffix(format string, opts any) string {
	set := plan.SetOptions(opts)
	parts := []string{strings.TrimPrefix(format, "openvino-")}
	for _, w := range quantizeWith {
		if v, ok := set[w.key]; ok {
			b, isBool := v.(bool)
			switch {
			case w.key == "mode":
				parts = append(parts, fmt.Sprint(v))
			case isBool && b:
				parts = append(parts, w.tag)
			case isBool:
				parts = append(parts, "no-"+w.tag)
			default:
				parts = append(parts, fmt.Sprintf("%s%v", w.tag, v))
			}
		}
	}
	return strings.Join(parts, "+")
}
