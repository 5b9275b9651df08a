package plan

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/steps"
)

func init() { RegisterPipeline("qnn", expandQNN) }

// qnnWeightTypes is the weight type of each QNN format; activations are
// 16-bit in both (the "a16").
var qnnWeightTypes = map[string]string{
	"qnn-w8a16": "uint8",
	"qnn-w4a16": "int4",
}

// expandQNN: source -> fp32 prefill export (no KV cache: HTP graphs have
// static shapes) -> QNN QDQ (static shape [1, context], calibrated on the
// recipe's calibration text) -> onnx-validate of the QDQ model on ONNX
// Runtime's CPU provider (logits gate, perplexity against the transformers
// baseline). With `backend: ai-hub` or `backend: qnn-sdk` a qnn-compile
// step turns the validated QDQ model into a Hexagon context binary, which
// becomes the published model; the default `ort-qdq` publishes the QDQ
// model itself (what ONNX Runtime's QNN execution provider loads).
func expandQNN(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add AddFunc) (*Step, []string) {
	ppl := t.Quality.Perplexity
	baseline := onnxBaseline(r, t, add)
	fp32 := onnxExportStep(t, false, add)
	params := steps.Params{"seq_len": ppl.Context, "weight_type": qnnWeightTypes[f.Name], "activation_type": "uint16", "samples": 4}
	suffix := withSuffix(t, []string{"samples"}, params)
	qdq := add(&Step{ID: fmt.Sprintf("qnn-qdq:%s@s%d%s", f.Name[len("qnn-"):], ppl.Context, suffix), Kind: "qnn-qdq",
		Needs: []string{fp32.ID, SourceStepID}, Params: params,
		Data: map[string]string{"calibration": r.Data.Calibration}}, t.Name)
	check := onnxValidateStep(r, t, f, qdq, baseline, add)

	backend, _ := t.With["backend"].(string)
	if backend == "" || backend == steps.QNNBackendORT {
		return qdq, []string{check.ID}
	}
	cparams := steps.Params{"backend": backend, "device": t.Device}
	csuffix := withSuffix(t, []string{"hub_device", "dsp_arch", "hub_timeout_s"}, cparams)
	compile := add(&Step{ID: fmt.Sprintf("qnn-compile:%s:%s:%s%s", backend, t.Device, qdq.ID[len("qnn-qdq:"):], csuffix),
		Kind: "qnn-compile", Needs: []string{qdq.ID}, Params: cparams}, t.Name)
	return compile, []string{check.ID}
}

// QNNWeightCheck warns, before anything runs, about qnn-w4a16 through the
// ort-qdq backend: ONNX Runtime's QNN QDQ flow quantizes MatMul weights per
// tensor (QNN EP has no per-channel MatMul), and one scale per tensor at 4
// bits destroys an LLM. Measured on the built-in model: perplexity 159,146
// against 24.59, top-1 agreement 0.8%; the gate refuses it, but only after
// the calibration has run, so say it up front.
func QNNWeightCheck(p *Plan) recipe.Diagnostics {
	var diags recipe.Diagnostics
	for _, t := range p.Recipe.Targets {
		if t.Format != "qnn-w4a16" {
			continue
		}
		if backend, _ := t.With["backend"].(string); backend != "" && backend != steps.QNNBackendORT {
			continue
		}
		diags = append(diags, recipe.Diagnostic{Pos: t.FormatPos,
			Msg: fmt.Sprintf("target %q: qnn-w4a16 through the ort-qdq backend quantizes MatMul weights per tensor, which at 4 bits breaks LLMs "+
				"(measured on builtin:smollm2-135m: perplexity 159,146, the gate fails it)", t.Name),
			Hint: "use qnn-w8a16, or backend: ai-hub or qnn-sdk, whose converters quantize 4-bit weights per channel or per block"})
	}
	return diags
}

// PlanNotes are what a run should say before it starts: targets this host
// cannot build and targets whose chosen flow is known to fail its gate.
func PlanNotes(p *Plan) recipe.Diagnostics {
	return append(NvidiaGPUCheck(p), QNNWeightCheck(p)...)
}
