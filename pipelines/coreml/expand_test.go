package coreml_test

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	_ "github.com/edgepipe/edgepipe/pipelines" // every family
	"github.com/edgepipe/edgepipe/pipelines/coreml"
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

func step(t *testing.T, p *plan.Plan, id string) *plan.Step {
	t.Helper()
	s, ok := p.Step(id)
	if !ok {
		var ids []string
		for _, s := range p.Steps {
			ids = append(ids, s.ID)
		}
		t.Fatalf("no step %s in %v", id, ids)
	}
	return s
}

// A target with no options converts once for its context, stateful, with
// the default weights, and validates the package against the source on the
// recipe's evaluation text; options and another evaluation are spelled in
// the ids, so targets that differ in them never share a step.
func TestExpandCoreML(t *testing.T) {
	p := expand(t, `edgepipe: 1
name: tiny
model: {source: ./model}
data: {eval: eval.txt}
targets:
  iphone: {device: apple-a18, format: coreml-int4, context: 4096}
  same: {device: apple-a18, format: coreml-int4, context: 4096, with: {kv_cache: stateful}}
`)
	conv := step(t, p, "coreml-convert:int4@c4096")
	if conv.Kind != "coreml-convert" || strings.Join(conv.Needs, ",") != plan.SourceStepID {
		t.Errorf("convert %s needs %v", conv.Kind, conv.Needs)
	}
	cp := conv.Params.(*coreml.ConvertParams)
	want := coreml.Weights{BlockSize: 32, Mode: coreml.ModeAffine, VDownBits: coreml.DefaultVDownBits}
	if cp.Context != 4096 || cp.KVCache != "stateful" || cp.Weights != want {
		t.Errorf("convert params %+v", cp)
	}
	val := step(t, p, "coreml-validate:int4@c4096")
	if val.Kind != "coreml-validate" || strings.Join(val.Needs, ",") != conv.ID+","+plan.SourceStepID {
		t.Errorf("validate %s needs %v", val.Kind, val.Needs)
	}
	vp := val.Params.(*coreml.ValidateParams)
	if vp.Weights != want || vp.Eval != (steps.Eval{Chunk: 512}) || val.Data[steps.DataEval] != "eval.txt" {
		t.Errorf("validate params %+v, data %v", vp, val.Data)
	}
	pub := step(t, p, "publish:same")
	if strings.Join(pub.Needs, ",") != conv.ID+","+val.ID+",contract:"+conv.ID {
		t.Errorf("kv_cache: stateful is the default, yet publish:same needs %v", pub.Needs)
	}

	p = expand(t, `edgepipe: 1
name: tiny
model: {source: ./model}
data: {eval: eval.txt}
quality: {perplexity: {context: 256, max_chunks: 8}}
targets:
  sym:
    device: apple-a18
    format: coreml-int4
    context: 2048
    with: {mode: symmetric, kv_cache: none, quantize_embeddings: true, v_down_bits: 4}
`)
	suffix := "int4@c2048+kv=none+mode=symmetric+quantize_embeddings=true+v_down_bits=4"
	conv = step(t, p, "coreml-convert:"+suffix)
	cp = conv.Params.(*coreml.ConvertParams)
	want = coreml.Weights{BlockSize: 32, Mode: coreml.ModeSymmetric, QuantizeEmbeddings: true, VDownBits: 4}
	if cp.Context != 2048 || cp.KVCache != "none" || cp.Weights != want {
		t.Errorf("convert params %+v", cp)
	}
	val = step(t, p, "coreml-validate:"+suffix+"/eval-c256n8")
	vp = val.Params.(*coreml.ValidateParams)
	if vp.Weights != want || vp.Eval != (steps.Eval{Chunk: 256, MaxChunks: 8}) {
		t.Errorf("validate params %+v", vp)
	}
}

// The options' string enums are the recipe's to refuse, at the key.
// (v_down_bits' enum of whole numbers is not checked there: the kinds
// refuse it, see TestWeightsRefused.)
func TestCoreMLOptionsRefused(t *testing.T) {
	for _, tc := range []struct{ with, msg string }{
		{"{mode: asym}", "targets.iphone.with.mode"},
		{"{kv_cache: dynamic}", "targets.iphone.with.kv_cache"},
	} {
		_, err := recipe.LoadBytes("r.yaml", []byte(`edgepipe: 1
name: tiny
model: {source: ./model}
targets:
  iphone: {device: apple-a18, format: coreml-int4, context: 4096, with: `+tc.with+`}
`), plan.Catalog{}, nil)
		if err == nil || !strings.Contains(err.Error(), "r.yaml:5:") || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("with %s: %v, want an error at %s", tc.with, err, tc.msg)
		}
	}
}
