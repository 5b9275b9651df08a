package llmcompressor_test

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	_ "github.com/edgepipe/edgepipe/pipelines" // every family
	"github.com/edgepipe/edgepipe/pipelines/llmcompressor"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

func load(t *testing.T, src string) (*plan.Plan, error) {
	t.Helper()
	r, err := recipe.LoadBytes("r.yaml", []byte(src), plan.Catalog{}, nil)
	if err != nil {
		return nil, err
	}
	return plan.Expand(r)
}

const llmcRecipe = `edgepipe: 1
name: gpu
model: {source: builtin:smollm2-135m}
quality: {perplexity: {context: 256, max_chunks: 8}}
targets:
  gptq: {device: nvidia-a100, format: gptq-w4a16}
  awq: {device: nvidia-a100, format: awq-w4a16}
  rtn: {device: nvidia-a100, format: awq-w4a16, with: {rounding: rtn, group_size: 32, v_down_bits: 4}}
`

// Each target's quantization is a step whose id spells the options it
// sets, calibrated on the recipe's text; its perplexity step needs the
// one transformers baseline.
func TestExpandLLMCompressor(t *testing.T) {
	p, err := load(t, llmcRecipe)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"source":                                             "",
		"hf-perplexity:baseline":                             "source",
		"llmc-quantize:gptq-w4a16":                           "source",
		"llmc-perplexity:gptq-w4a16":                         "llmc-quantize:gptq-w4a16,hf-perplexity:baseline",
		"llmc-quantize:awq-w4a16":                            "source",
		"llmc-perplexity:awq-w4a16":                          "llmc-quantize:awq-w4a16,hf-perplexity:baseline",
		"llmc-quantize:awq-w4a16+g32+round=rtn+vd4":          "source",
		"llmc-perplexity:awq-w4a16+g32+round=rtn+vd4":        "llmc-quantize:awq-w4a16+g32+round=rtn+vd4,hf-perplexity:baseline",
		"generate:reference":                                 "source",
		"llmc-decode:gptq-w4a16":                             "llmc-quantize:gptq-w4a16,generate:reference",
		"llmc-decode:awq-w4a16":                              "llmc-quantize:awq-w4a16,generate:reference",
		"llmc-decode:awq-w4a16+g32+round=rtn+vd4":            "llmc-quantize:awq-w4a16+g32+round=rtn+vd4,generate:reference",
		"contract:llmc-quantize:gptq-w4a16":                  "source,llmc-quantize:gptq-w4a16",
		"contract:llmc-quantize:awq-w4a16":                   "source,llmc-quantize:awq-w4a16",
		"contract:llmc-quantize:awq-w4a16+g32+round=rtn+vd4": "source,llmc-quantize:awq-w4a16+g32+round=rtn+vd4",
		"publish:gptq":                                       "llmc-quantize:gptq-w4a16,llmc-perplexity:gptq-w4a16,llmc-decode:gptq-w4a16,contract:llmc-quantize:gptq-w4a16",
		"publish:awq":                                        "llmc-quantize:awq-w4a16,llmc-perplexity:awq-w4a16,llmc-decode:awq-w4a16,contract:llmc-quantize:awq-w4a16",
		"publish:rtn": "llmc-quantize:awq-w4a16+g32+round=rtn+vd4,llmc-perplexity:awq-w4a16+g32+round=rtn+vd4," +
			"llmc-decode:awq-w4a16+g32+round=rtn+vd4,contract:llmc-quantize:awq-w4a16+g32+round=rtn+vd4",
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
	for id, want := range map[string]llmcompressor.QuantizeParams{
		// GPTQ rounds with a searched range; AWQ rounded by GPTQ too, by
		// default; AWQ rounded to nearest keeps min/max.
		"llmc-quantize:gptq-w4a16": {Scheme: "gptq", Samples: 32, SeqLen: 512, Observer: "mse", ActOrder: "static", VDownBits: 8},
		"llmc-quantize:awq-w4a16": {Scheme: "awq", Samples: 32, SeqLen: 512, NGrid: 20, Observer: "mse", ActOrder: "static",
			Rounding: "gptq", VDownBits: 8},
		"llmc-quantize:awq-w4a16+g32+round=rtn+vd4": {Scheme: "awq", GroupSize: 32, Samples: 32, SeqLen: 512, NGrid: 20, Observer: "minmax",
			Rounding: "rtn", VDownBits: 4},
	} {
		s, _ := p.Step(id)
		if q := s.Params.(*llmcompressor.QuantizeParams); *q != want || s.Data["calibration"] == "" {
			t.Errorf("%s params %+v, want %+v (data %v)", id, q, want, s.Data)
		}
	}
	s, _ := p.Step("llmc-perplexity:gptq-w4a16")
	if ev := s.Params.(*steps.Eval); *ev != (steps.Eval{Chunk: 256, MaxChunks: 8}) || s.Data["eval"] == "" {
		t.Errorf("perplexity params %+v, data %v", ev, s.Data)
	}
}

// Each target's decode check needs its checkpoint and the one shared
// reference, and carries its quality.generation bounds; a target with
// other bounds or another max_new_tokens gets its own step (and its own
// reference for another length), spelled in the id.
func TestExpandDecodeCheck(t *testing.T) {
	p, err := load(t, `edgepipe: 1
name: gpu
model: {source: builtin:smollm2-135m}
quality: {generation: {max_mean_kl: 0.5}}
targets:
  a: {device: nvidia-a100, format: gptq-w4a16}
  b: {device: nvidia-h100, format: gptq-w4a16, quality: {generation: {min_token_agreement: 0.9}}}
  c: {device: nvidia-a100, format: awq-w4a16, quality: {generation: {max_new_tokens: 16}}}
  d: {device: nvidia-h100, format: gptq-w4a16}
`)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]struct {
		needs  string
		params shared.DecodeParams
	}{
		"llmc-decode:gptq-w4a16+kl=0.5":           {"llmc-quantize:gptq-w4a16,generate:reference", shared.DecodeParams{MaxNewTokens: 64, MinTokenAgreement: 0.5, MaxMeanKL: 0.5}},
		"llmc-decode:gptq-w4a16+agree=0.9+kl=0.5": {"llmc-quantize:gptq-w4a16,generate:reference", shared.DecodeParams{MaxNewTokens: 64, MinTokenAgreement: 0.9, MaxMeanKL: 0.5}},
		"llmc-decode:awq-w4a16@n16+kl=0.5":        {"llmc-quantize:awq-w4a16,generate:reference@n16", shared.DecodeParams{MaxNewTokens: 16, MinTokenAgreement: 0.5, MaxMeanKL: 0.5}},
	} {
		s, ok := p.Step(id)
		if !ok {
			t.Errorf("no step %s", id)
			continue
		}
		if got := strings.Join(s.Needs, ","); got != want.needs || *s.Params.(*shared.DecodeParams) != want.params || s.Kind != "llmc-decode" {
			t.Errorf("%s (%s): needs %q params %+v", id, s.Kind, got, s.Params)
		}
	}
	for id, n := range map[string]int{"generate:reference": 64, "generate:reference@n16": 16} {
		s, ok := p.Step(id)
		if !ok {
			t.Errorf("no step %s", id)
			continue
		}
		if *s.Params.(*shared.GenerateParams) != (shared.GenerateParams{MaxNewTokens: n}) || s.Kind != "generate-reference" ||
			s.Data["prompts"] != "builtin:chat-prompts" || s.Data["eval"] != "builtin:eval" || strings.Join(s.Needs, ",") != "source" {
			t.Errorf("%s: %s %+v, data %v, needs %v", id, s.Kind, s.Params, s.Data, s.Needs)
		}
	}
	// a and d decode the same checkpoint with the same bounds: one step.
	s, _ := p.Step("llmc-decode:gptq-w4a16+kl=0.5")
	if strings.Join(s.Targets, ",") != "a,d" {
		t.Errorf("shared decode check serves %v", s.Targets)
	}
	pub, _ := p.Step("publish:b")
	if !strings.Contains(strings.Join(pub.Needs, ","), "llmc-decode:gptq-w4a16+agree=0.9+kl=0.5") {
		t.Errorf("publish:b needs %v: its decode check does not gate it", pub.Needs)
	}
}

func TestRefusedOptions(t *testing.T) {
	for _, tc := range []struct{ format, with, want string }{
		{"awq-w4a16", "{v_down_bits: 6}", "r.yaml:5:54: targets.t.with.v_down_bits is 6, which is not one of its values\n  hint: use 4 or 8"},
		{"gptq-w4a16", "{v_down_bits: 16}", "targets.t.with.v_down_bits is 16, which is not one of its values"},
		{"awq-w4a16", "{actorder: group}", `targets.t.with: unknown option "actorder"`},
		{"gptq-w4a16", "{rounding: rtn}", `targets.t.with: unknown option "rounding"`},
		{"awq-w4a16", "{n_grid: 2}", "targets.t.with.n_grid must be at least 3, not 2"},
		{"awq-w4a16", "{observer: l2}", `targets.t.with.observer is "l2", which is not one of its values`},
		{"gptq-w4a16", "{group_size: 0}", "targets.t.with.group_size must be at least 1, not 0"},
		{"gptq-w4a16", "{max_seq_length: 4}", "targets.t.with.max_seq_length must be at least 8, not 4"},
	} {
		_, err := load(t, `edgepipe: 1
name: gpu
model: {source: builtin:smollm2-135m}
targets:
  t: {device: nvidia-a100, format: `+tc.format+`, with: `+tc.with+`}
`)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with %s: %v, want %q", tc.format, tc.with, err, tc.want)
		}
	}
}
