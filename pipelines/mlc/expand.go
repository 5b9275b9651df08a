package mlc

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// expandMLC: source -> the weights (mlc-native-convert, or mlc_llm
// convert_weight with `backend: mlc-llm`; shared by every context) -> the
// model folder per context and conversation template (mlc-native-config or
// mlc_llm gen_config; optionally mlc_llm compile --device webgpu) ->
// checks: mlc-validate (the layout), mlc-gate (the shards read back,
// dequantized into the unconverted model and scored against the
// transformers baseline on the same tokens), mlc-decode (the same
// dequantized model decoded token by token through transformers' KV cache,
// against its prefill and the shared generate:reference) and
// mlc-webgpu-check (the shards decoded in Chromium on WebGPU, equal to
// what the gate scored).
func expandMLC(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
	q := f.Name[len("mlc-"):]
	n := plan.TargetContext(t)
	opts := t.Options.(*Options)
	tmpl := plan.Or(opts.ConvTemplate, "chatml")
	if tmpl == "" {
		tmpl = "chatml"
	}
	backend := plan.Or(opts.Backend, BackendNative)
	suffix := fmt.Sprintf("%s@c%d", q, n)
	if tmpl != "chatml" {
		suffix += "+" + tmpl
	}
	var weights, model *plan.Step
	if backend == BackendMLCLLM {
		weights = add(&plan.Step{ID: "mlc-convert-weight:" + q, Kind: "mlc-convert-weight", Needs: []string{plan.SourceStepID},
			Params: &WeightParams{Quantization: q}}, t.Name)
		model = add(&plan.Step{ID: "mlc-gen-config:" + suffix, Kind: "mlc-gen-config", Needs: []string{weights.ID, plan.SourceStepID},
			Params: &ConfigParams{Quantization: q, Context: n, ConvTemplate: tmpl}}, t.Name)
	} else {
		weights = add(nativeConvertStep(r, t, q, opts), t.Name)
		model = add(&plan.Step{ID: "mlc-native-config:" + suffix, Kind: "mlc-native-config", Needs: []string{weights.ID, plan.SourceStepID},
			Params: &ConfigParams{Quantization: q, Context: n, ConvTemplate: tmpl}}, t.Name)
	}
	if opts.Compile {
		model = add(&plan.Step{ID: "mlc-compile:webgpu/" + model.ID[len("mlc-"):], Kind: "mlc-compile", Needs: []string{model.ID},
			Params: &CompileParams{Device: "webgpu"}}, t.Name)
	}
	val := add(&plan.Step{ID: "mlc-validate:" + model.ID, Kind: "mlc-validate", Needs: []string{model.ID, plan.SourceStepID},
		Params: &ValidateParams{Context: n, Quantization: q}}, t.Name)
	checks := []string{val.ID}

	baseline := plan.HFBaseline(r, t, add)
	gid := "mlc-gate:" + weights.ID
	if baseline.ID != plan.HFBaselineStepID {
		gid += baseline.ID[len(plan.HFBaselineStepID):]
	}
	ev := plan.EvalOf(t.Quality.Perplexity)
	gate := add(&plan.Step{ID: gid, Kind: "mlc-gate", Needs: []string{weights.ID, baseline.ID, plan.SourceStepID},
		Params: &ev, Data: plan.EvalData(r)}, t.Name)
	checks = append(checks, gate.ID)
	decode := plan.GenerationCheck(r, t, add, "mlc-decode", weights.ID, weights.ID, plan.SourceStepID)
	checks = append(checks, decode.ID)
	if plan.Or(opts.WebGPUCheck, true) {
		web := add(&plan.Step{ID: "mlc-webgpu-check:" + gate.ID, Kind: "mlc-webgpu-check", Needs: []string{weights.ID, gate.ID},
			Params: &WebGPUParams{Quantization: q, TimeoutS: DefaultWebGPUTimeoutS, Page: PageDigest()}}, t.Name)
		checks = append(checks, web.ID)
	}
	return model, checks
}

// nativeConvertStep is the native converter's step; its id names the
// scales when they are not the default, so targets that differ in them get
// their own weights.
func nativeConvertStep(r *recipe.Recipe, t *recipe.Target, q string, opts *Options) *plan.Step {
	p := &WeightParams{Quantization: q, Scales: plan.Or(opts.Scales, ScalesImatrix)}
	id := "mlc-native-convert:" + q
	if p.Scales != ScalesImatrix {
		id += "+scales=" + p.Scales
	}
	st := &plan.Step{ID: id, Kind: "mlc-native-convert", Needs: []string{plan.SourceStepID}, Params: p}
	if p.Scales == ScalesImatrix {
		p.AWQ = plan.Or(opts.AWQ, false)
		// GPTQ's error feedback and AWQ's rescaling are alternatives: awq
		// alone rounds the tied embedding by GPTQ and the rest to nearest.
		p.Rounding = plan.Or(opts.Rounding, RoundingGPTQ)
		if p.AWQ && opts.Rounding == nil {
			p.Rounding = RoundingGPTQEmbedding
		}
		if p.Rounding != RoundingGPTQ {
			st.ID += "+rounding=" + p.Rounding
		}
		if p.AWQ {
			st.ID += "+awq"
		}
		p.CalibContext = t.Quality.Perplexity.Context
		defaultChunks := DefaultCalibrationChunks(p.CalibContext)
		p.CalibChunks = plan.Or(opts.CalibrationChunks, defaultChunks)
		if p.CalibChunks != defaultChunks {
			st.ID += fmt.Sprintf("+calib=%d", p.CalibChunks)
		}
		st.Data = plan.CalibrationData(r)
	}
	return st
}
