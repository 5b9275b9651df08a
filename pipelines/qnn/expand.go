package qnn

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/pipelines/onnx"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// qnnLogitLimits are the max |logit difference| of the converted model
// against PyTorch over the first evaluation chunk (see the onnx family's
// limits). ort-qdq W8A16 measured 8.2 (mean 0.74, same top-1 81%); the same
// graph quantized without keeping the RMSNorm statistics in float measured
// 46 (ppl 112199): 20 separates the two. On the HTP simulator (context 64)
// W8A16 per channel measured 3.90 and W4A16 per channel 30.4 (ppl +18.9).
var qnnLogitLimits = map[string]float64{
	"qnn-w8a16": 20,
	"qnn-w4a16": 30,
}

// qnnWeightTypes is the weight type of each QNN format; activations are
// 16-bit in both (the "a16").
var qnnWeightTypes = map[string]string{
	"qnn-w8a16": "uint8",
	"qnn-w4a16": "int4",
}

// qnnMinTop1 is the least share of positions where the compiled model
// picks PyTorch's top-1 token on the first evaluation chunk (the HTP
// backend's second logits check). See docs/results/qnn-htp.md.
var qnnMinTop1 = map[string]float64{
	"qnn-w8a16": 0.6,
	"qnn-w4a16": 0.5,
}

// expandQNN: source -> fp32 prefill export (no KV cache: HTP graphs have
// static shapes) -> QNN QDQ (static shape [1, context], calibrated on the
// recipe's calibration text). Then, by backend:
//   - qnn-htp (the default): qnn-htp compiles the QDQ model with QNN's HTP
//     backend into an EPContext model + context binary for the device's
//     SoC and gates it on the HTP simulator; the QDQ graph takes input_ids
//     only (positions and mask folded) and W4A16 weights are per channel;
//   - ort-qdq: onnx-validate scores the QDQ model on ONNX Runtime's CPU
//     provider, and the QDQ model is published;
//   - ai-hub / qnn-sdk: as ort-qdq, then a qnn-compile step (stand-ins
//     here) turns the QDQ model into a context binary.
func expandQNN(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
	ppl := t.Quality.Perplexity
	opts := t.Options.(*Options)
	backend := opts.backend()
	if n := plan.Or(opts.GateChunks, 0); backend == QNNBackendHTP && n > 0 && (ppl.MaxChunks == 0 || n < ppl.MaxChunks) {
		// Fewer chunks on the simulator; the baseline scores the same ones.
		short := *t
		short.Quality.Perplexity.MaxChunks = n
		t = &short
	}
	baseline := plan.HFBaseline(r, t, add)
	fp32 := onnx.ExportStep(t, false, add)
	params := &QDQParams{SeqLen: ppl.Context, WeightType: qnnWeightTypes[f.Name], ActivationType: "uint16",
		Samples: plan.Or(opts.Samples, DefaultSamples)}
	id := fmt.Sprintf("qnn-qdq:%s@s%d", f.Name[len("qnn-"):], ppl.Context)
	if backend == QNNBackendHTP {
		// The HTP backend's form of the graph: static inputs folded, and
		// weights per output channel (MatMuls as 1x1 Convs, the only
		// per-channel weights QNN takes). Measured on the built-in model at
		// 64 x 2 on ONNX Runtime's CPU provider: W8A16 per tensor +1.90,
		// per channel -0.03 (docs/results/qnn-htp.md).
		params.StaticInputs = true
		params.PerChannel = true
		if params.WeightType == "uint8" {
			// Per-channel weights are symmetric: signed.
			params.WeightType = "int8"
		}
		id += "+htp"
	}
	qdq := add(&plan.Step{ID: id + plan.OptionSuffix(t.Options, "samples"), Kind: "qnn-qdq",
		Needs: []string{fp32.ID, plan.SourceStepID}, Params: params,
		Data: plan.CalibrationData(r)}, t.Name)
	if backend == QNNBackendHTP {
		d, _ := catalog.Lookup(t.Device)
		hp := &HTPParams{Eval: plan.EvalOf(t.Quality.Perplexity), Device: d.ID, SoCModel: d.SoCModel, HTPArch: d.HTPArch,
			MaxAbsLogitDiff: plan.Or(opts.MaxAbsLogitDiff, qnnLogitLimits[f.Name]),
			MinTop1:         plan.Or(opts.MinTop1, qnnMinTop1[f.Name])}
		suffix := plan.OptionSuffix(t.Options, "max_abs_logit_diff", "min_top1_agreement", "gate_chunks")
		htp := add(&plan.Step{ID: fmt.Sprintf("qnn-htp:%s:%s%s", d.ID, qdq.ID[len("qnn-qdq:"):], suffix), Kind: "qnn-htp",
			Needs: []string{qdq.ID, plan.SourceStepID, baseline.ID}, Params: hp, Data: plan.EvalData(r)}, t.Name)
		return htp, []string{htp.ID}
	}
	check := onnx.ValidateStep(r, t, qnnLogitLimits[f.Name], qdq, baseline, add)
	if backend == QNNBackendORT {
		return qdq, []string{check.ID}
	}
	cparams := &CompileParams{Backend: backend, Device: t.Device, SeqLen: ppl.Context}
	switch backend {
	case QNNBackendAIHub:
		cparams.HubDevice = plan.Or(opts.HubDevice, qnnHubDevices[t.Device])
		cparams.HubTimeoutS = plan.Or(opts.HubTimeoutS, DefaultHubTimeoutS)
	case QNNBackendSDK:
		cparams.DSPArch = plan.Or(opts.DSPArch, qnnDSPArch[t.Device])
	}
	csuffix := plan.OptionSuffix(t.Options, "hub_device", "dsp_arch", "hub_timeout_s")
	compile := add(&plan.Step{ID: fmt.Sprintf("qnn-compile:%s:%s:%s%s", backend, t.Device, qdq.ID[len("qnn-qdq:"):], csuffix),
		Kind: "qnn-compile", Needs: []string{qdq.ID}, Params: cparams}, t.Name)
	return compile, []string{check.ID}
}

// QNNWeightCheck warns, before anything runs, about qnn-w4a16 through the
// ort-qdq backend: ONNX Runtime's QNN QDQ flow quantizes MatMul weights per
// tensor (QNN EP has no per-channel MatMul), and one scale per tensor at 4
// bits destroys an LLM. Measured on the built-in model: perplexity 159,146
// against 24.59, top-1 agreement 0.8%; the gate refuses it, but only after
// the calibration has run, so say it up front.
func QNNWeightCheck(p *plan.Plan) recipe.Diagnostics {
	var diags recipe.Diagnostics
	for _, t := range p.Recipe.Targets {
		if t.Format != "qnn-w4a16" {
			continue
		}
		if o, _ := t.Options.(*Options); o.backend() != QNNBackendORT {
			continue
		}
		diags = append(diags, recipe.Diagnostic{Pos: t.FormatPos,
			Msg: fmt.Sprintf("target %q: qnn-w4a16 through the ort-qdq backend quantizes MatMul weights per tensor, which at 4 bits breaks LLMs "+
				"(measured on builtin:smollm2-135m: perplexity 159,146, the gate fails it)", t.Name),
			Hint: "use qnn-w8a16, or the default backend qnn-htp, which quantizes 4-bit weights per output channel (as 1x1 Convs)"})
	}
	return diags
}

// Defaults of the QNN options.
const (
	DefaultSamples     = 4
	DefaultHubTimeoutS = 1800
)
