package mlc_test

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	_ "github.com/edgepipe/edgepipe/pipelines" // every family
	"github.com/edgepipe/edgepipe/pipelines/mlc"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

func expand(t *testing.T, src string) *plan.Plan {
	t.Helper()
	r, err := recipe.LoadBytes("r.yaml", []byte(src), plan.Catalog{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Expand(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// needs checks a step's kind and needs and returns it.
func needs(t *testing.T, p *plan.Plan, id, kind string, want ...string) *plan.Step {
	t.Helper()
	s, ok := p.Step(id)
	if !ok {
		var ids []string
		for _, s := range p.Steps {
			ids = append(ids, s.ID)
		}
		t.Fatalf("no step %s in %v", id, ids)
	}
	if s.Kind != kind || strings.Join(s.Needs, ",") != strings.Join(want, ",") {
		t.Errorf("%s: kind %s needs %v, want %s needs %v", id, s.Kind, s.Needs, kind, want)
	}
	return s
}

const recipeMLC = `edgepipe: 1
name: web
model: {source: ./model}
targets:
  m3: {device: webgpu-m3-max, format: mlc-q4f16_1, context: 1024}
  m3-long: {device: webgpu-m3-max, format: mlc-q4f16_1, context: 4096}
  android: {device: webgpu-android, format: mlc-q4f32_1, context: 2048, with: {scales: mse, conv_template: llama-3, webgpu_check: false}}
  awq: {device: webgpu-m3-max, format: mlc-q4f16_1, context: 1024, with: {awq: true, calibration_chunks: 8}}
  mlcllm: {device: webgpu-android, format: mlc-q4f16_1, context: 2048, with: {backend: mlc-llm, compile: true}}
`

// The native backend by default: one conversion per quantization and
// choice of scales (imatrix, GPTQ, calibrated on the built-in text),
// shared by every context; a model folder per context and template; the
// layout check, the gate against the transformers baseline and the WebGPU
// check of the gate's weights.
func TestExpandNative(t *testing.T) {
	p := expand(t, recipeMLC)
	conv := needs(t, p, "mlc-native-convert:q4f16_1", "mlc-native-convert", plan.SourceStepID)
	if w := conv.Params.(*mlc.WeightParams); *w != (mlc.WeightParams{Quantization: "q4f16_1", Scales: mlc.ScalesImatrix,
		Rounding: mlc.RoundingGPTQ, CalibContext: 512, CalibChunks: mlc.DefaultCalibrationChunks(512)}) {
		t.Errorf("convert params %+v", w)
	}
	if conv.Data[steps.DataCalibration] != recipe.DefaultCalibration {
		t.Errorf("convert data %v", conv.Data)
	}
	for _, c := range []struct {
		id  string
		ctx int
	}{{"mlc-native-config:q4f16_1@c1024", 1024}, {"mlc-native-config:q4f16_1@c4096", 4096}} {
		cfg := needs(t, p, c.id, "mlc-native-config", conv.ID, plan.SourceStepID)
		if cp := cfg.Params.(*mlc.ConfigParams); *cp != (mlc.ConfigParams{Quantization: "q4f16_1", Context: c.ctx, ConvTemplate: "chatml"}) {
			t.Errorf("%s params %+v", c.id, cp)
		}
		val := needs(t, p, "mlc-validate:"+c.id, "mlc-validate", c.id, plan.SourceStepID)
		if vp := val.Params.(*mlc.ValidateParams); *vp != (mlc.ValidateParams{Context: c.ctx, Quantization: "q4f16_1"}) {
			t.Errorf("validate params %+v", vp)
		}
	}
	gate := needs(t, p, "mlc-gate:"+conv.ID, "mlc-gate", conv.ID, plan.HFBaselineStepID, plan.SourceStepID)
	if ev := gate.Params.(*steps.Eval); *ev != (steps.Eval{Chunk: 512}) || gate.Data[steps.DataEval] != recipe.DefaultEval {
		t.Errorf("gate params %+v data %v", ev, gate.Data)
	}
	web := needs(t, p, "mlc-webgpu-check:"+gate.ID, "mlc-webgpu-check", conv.ID, gate.ID)
	if wp := web.Params.(*mlc.WebGPUParams); *wp != (mlc.WebGPUParams{Quantization: "q4f16_1", TimeoutS: mlc.DefaultWebGPUTimeoutS, Page: mlc.PageDigest()}) {
		t.Errorf("webgpu params %+v", wp)
	}
	// The decode check reads the same weights as the gate, the source
	// they are dequantized into and the shared reference.
	dec := needs(t, p, "mlc-decode:"+conv.ID, "mlc-decode", conv.ID, plan.SourceStepID, plan.ReferenceStepID)
	if dp := dec.Params.(*shared.DecodeParams); *dp != (shared.DecodeParams{MaxNewTokens: recipe.DefaultMaxNewTokens,
		MinTokenAgreement: recipe.DefaultMinTokenAgreement, MaxMeanKL: recipe.DefaultMaxMeanKL}) {
		t.Errorf("decode params %+v", dp)
	}
	if got := strings.Join(dec.Targets, ","); got != "m3,m3-long" {
		t.Errorf("the decode check of the shared weights serves %s", got)
	}
	needs(t, p, plan.ReferenceStepID, "generate-reference", plan.SourceStepID)
	needs(t, p, "publish:m3", "publish", "mlc-native-config:q4f16_1@c1024", "mlc-validate:mlc-native-config:q4f16_1@c1024", gate.ID, dec.ID, web.ID,
		"contract:mlc-native-config:q4f16_1@c1024")
}

// Options other than the defaults are in the ids, so no two targets that
// differ in them share weights; webgpu_check: false drops the browser.
func TestExpandOptions(t *testing.T) {
	p := expand(t, recipeMLC)
	conv := needs(t, p, "mlc-native-convert:q4f32_1+scales=mse", "mlc-native-convert", plan.SourceStepID)
	if w := conv.Params.(*mlc.WeightParams); *w != (mlc.WeightParams{Quantization: "q4f32_1", Scales: mlc.ScalesMSE}) || len(conv.Data) != 0 {
		t.Errorf("mse params %+v, data %v (mse reads no calibration)", w, conv.Data)
	}
	needs(t, p, "mlc-native-config:q4f32_1@c2048+llama-3", "mlc-native-config", conv.ID, plan.SourceStepID)
	gate := "mlc-gate:" + conv.ID
	needs(t, p, "publish:android", "publish", "mlc-native-config:q4f32_1@c2048+llama-3",
		"mlc-validate:mlc-native-config:q4f32_1@c2048+llama-3", gate, "mlc-decode:"+conv.ID, "contract:mlc-native-config:q4f32_1@c2048+llama-3")

	// awq alone takes GPTQ for the embedding only.
	awq := needs(t, p, "mlc-native-convert:q4f16_1+rounding=gptq-embedding+awq+calib=8", "mlc-native-convert", plan.SourceStepID)
	if w := awq.Params.(*mlc.WeightParams); *w != (mlc.WeightParams{Quantization: "q4f16_1", Scales: mlc.ScalesImatrix,
		Rounding: mlc.RoundingGPTQEmbedding, AWQ: true, CalibContext: 512, CalibChunks: 8}) {
		t.Errorf("awq params %+v", w)
	}

	// backend: mlc-llm runs mlc_llm's own commands, compile included.
	cw := needs(t, p, "mlc-convert-weight:q4f16_1", "mlc-convert-weight", plan.SourceStepID)
	if w := cw.Params.(*mlc.WeightParams); *w != (mlc.WeightParams{Quantization: "q4f16_1"}) {
		t.Errorf("mlc_llm weights %+v", w)
	}
	needs(t, p, "mlc-gen-config:q4f16_1@c2048", "mlc-gen-config", cw.ID, plan.SourceStepID)
	comp := needs(t, p, "mlc-compile:webgpu/gen-config:q4f16_1@c2048", "mlc-compile", "mlc-gen-config:q4f16_1@c2048")
	if cp := comp.Params.(*mlc.CompileParams); cp.Device != "webgpu" {
		t.Errorf("compile params %+v", cp)
	}
	needs(t, p, "mlc-validate:"+comp.ID, "mlc-validate", comp.ID, plan.SourceStepID)
	needs(t, p, "mlc-gate:"+cw.ID, "mlc-gate", cw.ID, plan.HFBaselineStepID, plan.SourceStepID)
	needs(t, p, "mlc-decode:"+cw.ID, "mlc-decode", cw.ID, plan.SourceStepID, plan.ReferenceStepID)
}

// Options that mean nothing with the others are refused at their key,
// with the fix.
func TestOptionsRefused(t *testing.T) {
	for _, tc := range []struct{ with, at, msg string }{
		{"{backend: mlc-llm, scales: mlc}", "scales", "only applies to backend: native"},
		{"{scales: mse, calibration_chunks: 4}", "calibration_chunks", "only applies to scales: imatrix with backend: native"},
		{"{rounding: gptq, awq: true}", "awq", "only applies to scales: imatrix with rounding: rtn or gptq-embedding"},
		{"{scales: mlc, rounding: rtn}", "rounding", "only applies to scales: imatrix with backend: native"},
		{"{backend: tvm}", "backend", `is "tvm", which is not one of its values`},
		{"{calibration_chunks: 0}", "calibration_chunks", "must be at least 1"},
	} {
		_, err := recipe.LoadBytes("r.yaml", []byte(`edgepipe: 1
name: web
model: {source: ./model}
targets:
  m3: {device: webgpu-m3-max, format: mlc-q4f16_1, with: `+tc.with+`}
`), plan.Catalog{}, nil)
		if err == nil || !strings.Contains(err.Error(), "r.yaml:5:") || !strings.Contains(err.Error(), "targets.m3.with."+tc.at+" "+tc.msg) {
			t.Errorf("with %s: %v, want targets.m3.with.%s %s", tc.with, err, tc.at, tc.msg)
		}
	}
	if probs := (&mlc.Options{}).CheckOptions(); len(probs) != 0 {
		t.Errorf("no options: %+v", probs)
	}
}
