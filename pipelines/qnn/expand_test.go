package qnn_test

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	_ "github.com/edgepipe/edgepipe/pipelines" // every family
	"github.com/edgepipe/edgepipe/pipelines/onnx"
	"github.com/edgepipe/edgepipe/pipelines/qnn"
)

func load(t *testing.T, src string) (*plan.Plan, error) {
	t.Helper()
	r, err := recipe.LoadBytes("r.yaml", []byte(src), plan.Catalog{}, nil)
	if err != nil {
		return nil, err
	}
	return plan.Expand(r)
}

const qnnRecipe = `edgepipe: 1
name: phone
model: {source: builtin:smollm2-135m}
quality: {perplexity: {context: 64, max_chunks: 4}}
targets:
  w8: {device: snapdragon-8-gen-3, format: qnn-w8a16, with: {gate_chunks: 2}}
  w4: {device: snapdragon-8-gen-3, format: qnn-w4a16}
  qdq: {device: snapdragon-8-gen-3, format: qnn-w8a16, with: {backend: ort-qdq, samples: 2}}
  hub: {device: snapdragon-8-gen-3, format: qnn-w8a16, with: {backend: ai-hub}}
  sdk: {device: snapdragon-x-elite, format: qnn-w8a16, with: {backend: qnn-sdk}}
`

// Every backend starts from the one prefill export; qnn-htp's QDQ model
// is its own (static inputs, per-channel weights) and its gate is the HTP
// step, on fewer chunks with gate_chunks (and a baseline on the same
// ones); the other backends are gated on ONNX Runtime's CPU provider.
func TestExpandQNN(t *testing.T) {
	p, err := load(t, qnnRecipe)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"source":                       "",
		"hf-perplexity:baseline":       "source",
		"hf-perplexity:baseline@c64n4": "source",
		"onnx-export:fp32-prefill":     "source",
		"qnn-qdq:w8a16@s64+htp":        "onnx-export:fp32-prefill,source",
		"qnn-htp:snapdragon-8-gen-3:w8a16@s64+htp+gate_chunks=2":          "qnn-qdq:w8a16@s64+htp,source,hf-perplexity:baseline",
		"qnn-qdq:w4a16@s64+htp":                                           "onnx-export:fp32-prefill,source",
		"qnn-htp:snapdragon-8-gen-3:w4a16@s64+htp":                        "qnn-qdq:w4a16@s64+htp,source,hf-perplexity:baseline@c64n4",
		"qnn-qdq:w8a16@s64+samples=2":                                     "onnx-export:fp32-prefill,source",
		"onnx-validate:w8a16@s64+samples=2@c64n4":                         "qnn-qdq:w8a16@s64+samples=2,source,hf-perplexity:baseline@c64n4",
		"qnn-qdq:w8a16@s64":                                               "onnx-export:fp32-prefill,source",
		"onnx-validate:w8a16@s64@c64n4":                                   "qnn-qdq:w8a16@s64,source,hf-perplexity:baseline@c64n4",
		"qnn-compile:ai-hub:snapdragon-8-gen-3:w8a16@s64":                 "qnn-qdq:w8a16@s64",
		"qnn-compile:qnn-sdk:snapdragon-x-elite:w8a16@s64":                "qnn-qdq:w8a16@s64",
		"contract:qnn-htp:snapdragon-8-gen-3:w8a16@s64+htp+gate_chunks=2": "source,qnn-htp:snapdragon-8-gen-3:w8a16@s64+htp+gate_chunks=2",
		"publish:w8": "qnn-htp:snapdragon-8-gen-3:w8a16@s64+htp+gate_chunks=2,qnn-htp:snapdragon-8-gen-3:w8a16@s64+htp+gate_chunks=2,contract:qnn-htp:snapdragon-8-gen-3:w8a16@s64+htp+gate_chunks=2",
		"contract:qnn-htp:snapdragon-8-gen-3:w4a16@s64+htp": "source,qnn-htp:snapdragon-8-gen-3:w4a16@s64+htp",
		"publish:w4":                           "qnn-htp:snapdragon-8-gen-3:w4a16@s64+htp,qnn-htp:snapdragon-8-gen-3:w4a16@s64+htp,contract:qnn-htp:snapdragon-8-gen-3:w4a16@s64+htp",
		"contract:qnn-qdq:w8a16@s64+samples=2": "source,qnn-qdq:w8a16@s64+samples=2",
		"publish:qdq":                          "qnn-qdq:w8a16@s64+samples=2,onnx-validate:w8a16@s64+samples=2@c64n4,contract:qnn-qdq:w8a16@s64+samples=2",
		"contract:qnn-compile:ai-hub:snapdragon-8-gen-3:w8a16@s64": "source,qnn-compile:ai-hub:snapdragon-8-gen-3:w8a16@s64",
		"publish:hub": "qnn-compile:ai-hub:snapdragon-8-gen-3:w8a16@s64,onnx-validate:w8a16@s64@c64n4,contract:qnn-compile:ai-hub:snapdragon-8-gen-3:w8a16@s64",
		"contract:qnn-compile:qnn-sdk:snapdragon-x-elite:w8a16@s64": "source,qnn-compile:qnn-sdk:snapdragon-x-elite:w8a16@s64",
		"publish:sdk": "qnn-compile:qnn-sdk:snapdragon-x-elite:w8a16@s64,onnx-validate:w8a16@s64@c64n4,contract:qnn-compile:qnn-sdk:snapdragon-x-elite:w8a16@s64",
	}
	if len(p.Steps) != len(want) {
		t.Errorf("%d steps, want %d", len(p.Steps), len(want))
	}
	for _, s := range p.Steps {
		needs, ok := want[s.ID]
		if !ok {
			t.Errorf("unexpected step %s", s.ID)
		} else if got := strings.Join(s.Needs, ","); got != needs {
			t.Errorf("%s needs %q, want %q", s.ID, got, needs)
		}
	}

	s, _ := p.Step("onnx-export:fp32-prefill")
	if e := s.Params.(*onnx.ExportParams); e.Past || e.Opset != onnx.DefaultOpset {
		t.Errorf("prefill export %+v", e)
	}
	for id, want := range map[string]qnn.QDQParams{
		// Per-channel weights are symmetric, so the HTP backend's W8 is int8.
		"qnn-qdq:w8a16@s64+htp":       {SeqLen: 64, WeightType: "int8", ActivationType: "uint16", Samples: 4, StaticInputs: true, PerChannel: true},
		"qnn-qdq:w4a16@s64+htp":       {SeqLen: 64, WeightType: "int4", ActivationType: "uint16", Samples: 4, StaticInputs: true, PerChannel: true},
		"qnn-qdq:w8a16@s64+samples=2": {SeqLen: 64, WeightType: "uint8", ActivationType: "uint16", Samples: 2},
	} {
		s, _ := p.Step(id)
		if q := s.Params.(*qnn.QDQParams); *q != want || s.Data["calibration"] == "" {
			t.Errorf("%s params %+v, data %v", id, q, s.Data)
		}
	}
	s, _ = p.Step("qnn-htp:snapdragon-8-gen-3:w8a16@s64+htp+gate_chunks=2")
	if h := s.Params.(*qnn.HTPParams); *h != (qnn.HTPParams{Eval: h.Eval, Device: "snapdragon-8-gen-3", SoCModel: 57, HTPArch: 75,
		MaxAbsLogitDiff: 20, MinTop1: 0.6}) || h.Chunk != 64 || h.MaxChunks != 2 {
		t.Errorf("htp params %+v", h)
	}
	s, _ = p.Step("qnn-htp:snapdragon-8-gen-3:w4a16@s64+htp")
	if h := s.Params.(*qnn.HTPParams); h.MaxAbsLogitDiff != 30 || h.MinTop1 != 0.5 || h.MaxChunks != 4 {
		t.Errorf("w4 htp params %+v", h)
	}
	s, _ = p.Step("qnn-compile:ai-hub:snapdragon-8-gen-3:w8a16@s64")
	if c := s.Params.(*qnn.CompileParams); *c != (qnn.CompileParams{Backend: qnn.QNNBackendAIHub, Device: "snapdragon-8-gen-3", SeqLen: 64,
		HubDevice: "Samsung Galaxy S24 (Family)", HubTimeoutS: qnn.DefaultHubTimeoutS}) {
		t.Errorf("ai-hub params %+v", c)
	}
	s, _ = p.Step("qnn-compile:qnn-sdk:snapdragon-x-elite:w8a16@s64")
	if c := s.Params.(*qnn.CompileParams); *c != (qnn.CompileParams{Backend: qnn.QNNBackendSDK, Device: "snapdragon-x-elite", SeqLen: 64, DSPArch: "v73"}) {
		t.Errorf("qnn-sdk params %+v", c)
	}
	s, _ = p.Step("onnx-validate:w8a16@s64@c64n4")
	if v := s.Params.(*onnx.ValidateParams); v.MaxAbsLogitDiff != 20 || v.Chunk != 64 || v.MaxChunks != 4 {
		t.Errorf("ort-qdq validation %+v", v)
	}
}

// qnn-w4a16 through ort-qdq is allowed, with a note that says it breaks.
func TestW4ThroughORTIsNoted(t *testing.T) {
	p, err := load(t, strings.Replace(qnnRecipe, "format: qnn-w8a16, with: {backend: ort-qdq, samples: 2}", "format: qnn-w4a16, with: {backend: ort-qdq}", 1))
	if err != nil {
		t.Fatal(err)
	}
	diags := qnn.QNNWeightCheck(p)
	if len(diags) != 1 || !strings.Contains(diags[0].Msg, `target "qdq": qnn-w4a16 through the ort-qdq backend`) || diags[0].Pos.Line != 8 {
		t.Errorf("notes %+v", diags)
	}
	if p, _ := load(t, qnnRecipe); len(qnn.QNNWeightCheck(p)) != 0 {
		t.Error("a note without qnn-w4a16 through ort-qdq")
	}
}

func TestRefusedOptions(t *testing.T) {
	for _, tc := range []struct{ with, want string }{
		{"{backend: tpu}", `r.yaml:5:62: targets.w8.with.backend is "tpu", which is not one of its values`},
		{"{samples: 0}", "targets.w8.with.samples must be at least 1, not 0"},
		{"{min_top1_agreement: -1}", "targets.w8.with.min_top1_agreement must be at least 0, not -1"},
		{"{gate_chunks: 0}", "targets.w8.with.gate_chunks must be at least 1, not 0"},
		{"{hub_timeout_s: 0}", "targets.w8.with.hub_timeout_s must be at least 1, not 0"},
		{"{opset: 16}", "targets.w8.with.opset must be at least 17, not 16"},
		{"{block_size: 32}", `targets.w8.with: unknown option "block_size"`},
	} {
		_, err := load(t, `edgepipe: 1
name: phone
model: {source: builtin:smollm2-135m}
targets:
  w8: {device: snapdragon-8-gen-3, format: qnn-w8a16, with: `+tc.with+`}
`)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("with %s: %v, want %q", tc.with, err, tc.want)
		}
	}
}
