package onnx_test

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	_ "github.com/edgepipe/edgepipe/pipelines" // every family
	"github.com/edgepipe/edgepipe/pipelines/onnx"
	"github.com/edgepipe/edgepipe/pipelines/shared"
)

func load(t *testing.T, src string) (*plan.Plan, error) {
	t.Helper()
	r, err := recipe.LoadBytes("r.yaml", []byte(src), plan.Catalog{}, nil)
	if err != nil {
		return nil, err
	}
	return plan.Expand(r)
}

const onnxRecipe = `edgepipe: 1
name: laptop
model: {source: builtin:smollm2-135m}
targets:
  fp32: {device: x86-laptop, format: onnx-fp32}
  int4: {device: x86-laptop, format: onnx-int4}
  rtn: {device: x86-laptop, format: onnx-int4, with: {method: rtn, block_size: 64, opset: 17}}
`

// The fp32 export is shared by onnx-fp32 and onnx-int4; an option of the
// export gives the target an export of its own; each model gets its
// validation, against the one transformers baseline.
func TestExpandONNX(t *testing.T) {
	p, err := load(t, onnxRecipe)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"source":                    "",
		"hf-perplexity:baseline":    "source",
		"onnx-export:fp32":          "source",
		"onnx-validate:fp32":        "onnx-export:fp32,source,hf-perplexity:baseline",
		"onnx-quantize:int4":        "onnx-export:fp32",
		"onnx-validate:int4":        "onnx-quantize:int4,source,hf-perplexity:baseline",
		"onnx-export:fp32+opset=17": "source",
		"onnx-quantize:int4+opset=17+block_size=64+method=rtn": "onnx-export:fp32+opset=17",
		"onnx-validate:int4+opset=17+block_size=64+method=rtn": "onnx-quantize:int4+opset=17+block_size=64+method=rtn,source,hf-perplexity:baseline",
		// Each model's decode check: the model, then the one shared
		// reference of the unconverted model's generations.
		"generate:reference": "source",
		"onnx-decode:fp32":   "onnx-export:fp32,generate:reference",
		"onnx-decode:int4":   "onnx-quantize:int4,generate:reference",
		"onnx-decode:int4+opset=17+block_size=64+method=rtn": "onnx-quantize:int4+opset=17+block_size=64+method=rtn,generate:reference",
		"contract:onnx-export:fp32":                          "source,onnx-export:fp32",
		"publish:fp32":                                       "onnx-export:fp32,onnx-validate:fp32,onnx-decode:fp32,contract:onnx-export:fp32",
		"contract:onnx-quantize:int4":                        "source,onnx-quantize:int4",
		"publish:int4":                                       "onnx-quantize:int4,onnx-validate:int4,onnx-decode:int4,contract:onnx-quantize:int4",
		"contract:onnx-quantize:int4+opset=17+block_size=64+method=rtn": "source,onnx-quantize:int4+opset=17+block_size=64+method=rtn",
		"publish:rtn": "onnx-quantize:int4+opset=17+block_size=64+method=rtn,onnx-validate:int4+opset=17+block_size=64+method=rtn," +
			"onnx-decode:int4+opset=17+block_size=64+method=rtn,contract:onnx-quantize:int4+opset=17+block_size=64+method=rtn",
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

	s, _ := p.Step("onnx-export:fp32")
	if e := s.Params.(*onnx.ExportParams); e.Opset != onnx.DefaultOpset || !e.Past {
		t.Errorf("export params %+v", e)
	}
	s, _ = p.Step("onnx-quantize:int4")
	if q := s.Params.(*onnx.QuantizeParams); *q != (onnx.QuantizeParams{Method: onnx.MethodHQQ, BlockSize: 32, LMHeadBits: 8, VDownBits: 8}) {
		t.Errorf("int4 defaults %+v", q)
	}
	s, _ = p.Step("onnx-quantize:int4+opset=17+block_size=64+method=rtn")
	if q := s.Params.(*onnx.QuantizeParams); *q != (onnx.QuantizeParams{Method: onnx.MethodRTN, BlockSize: 64, Symmetric: true, LMHeadBits: 8, VDownBits: 8}) {
		t.Errorf("rtn params %+v", q)
	}
	s, _ = p.Step("onnx-decode:int4")
	if d := s.Params.(*shared.DecodeParams); *d != (shared.DecodeParams{MaxNewTokens: recipe.DefaultMaxNewTokens,
		MinTokenAgreement: recipe.DefaultMinTokenAgreement, MaxMeanKL: recipe.DefaultMaxMeanKL}) || s.Kind != "onnx-decode" {
		t.Errorf("decode %s params %+v", s.Kind, d)
	}
	for id, limit := range map[string]float64{"onnx-validate:fp32": 1e-2, "onnx-validate:int4": 25} {
		s, _ := p.Step(id)
		v := s.Params.(*onnx.ValidateParams)
		if v.MaxAbsLogitDiff != limit || v.Chunk != 512 || s.Data["eval"] == "" {
			t.Errorf("%s params %+v, data %v", id, v, s.Data)
		}
	}
}

// keep_lm_head leaves the projection in float, so no width is passed.
func TestExpandKeepLMHead(t *testing.T) {
	p, err := load(t, strings.Replace(onnxRecipe, "format: onnx-int4}", "format: onnx-int4, with: {keep_lm_head: true, v_down_bits: 4, max_abs_logit_diff: 30}}", 1))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, s := range p.Steps {
		if !strings.Contains(s.ID, "keep_lm_head=true") || s.Kind == "contract" || s.Kind == "onnx-decode" {
			continue
		}
		found++
		switch q := s.Params.(type) {
		case *onnx.QuantizeParams:
			if *q != (onnx.QuantizeParams{Method: onnx.MethodHQQ, BlockSize: 32, KeepLMHead: true, VDownBits: 4}) {
				t.Errorf("%s params %+v", s.ID, q)
			}
		case *onnx.ValidateParams:
			if q.MaxAbsLogitDiff != 30 {
				t.Errorf("%s limit %v", s.ID, q.MaxAbsLogitDiff)
			}
		}
	}
	if found != 2 {
		t.Errorf("%d steps with keep_lm_head=true in their id, want the quantize and its validation", found)
	}
}

func TestRefusedOptions(t *testing.T) {
	for _, tc := range []struct{ with, want string }{
		{"{symmetric: true}", "r.yaml:5:56: targets.int4.with.symmetric only applies to method: rtn"},
		{"{keep_lm_head: true, lm_head_bits: 8}", "targets.int4.with.lm_head_bits does not apply with keep_lm_head: true"},
		{"{opset: 16}", "targets.int4.with.opset must be at least 17, not 16"},
		{"{block_size: 8}", "targets.int4.with.block_size must be at least 16, not 8"},
		{"{method: gptq}", `targets.int4.with.method is "gptq", which is not one of its values`},
		{"{v_down_bits: 6}", "r.yaml:5:56: targets.int4.with.v_down_bits is 6, which is not one of its values\n  hint: use 4 or 8"},
		{"{lm_head_bits: 16}", "targets.int4.with.lm_head_bits is 16, which is not one of its values"},
	} {
		_, err := load(t, `edgepipe: 1
name: laptop
model: {source: builtin:smollm2-135m}
targets:
  int4: {device: x86-laptop, format: onnx-int4, with: `+tc.with+`}
`)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("with %s: %v, want %q", tc.with, err, tc.want)
		}
	}
}
