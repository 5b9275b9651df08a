package openvino_test

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	_ "github.com/edgepipe/edgepipe/pipelines" // every family
	"github.com/edgepipe/edgepipe/pipelines/openvino"
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

const ovRecipe = `edgepipe: 1
name: npu
model: {source: builtin:smollm2-135m}
targets:
  int4: {device: intel-lunar-lake, format: openvino-int4}
  int8: {device: intel-lunar-lake, format: openvino-int8}
  awq: {device: intel-lunar-lake, format: openvino-int4, with: {awq: true, group_size: 32, calibration_samples: 8}}
`

// One export for every target; each compression its own step, with the
// calibration text only when a method reads it, and its validation.
func TestExpandOpenVINO(t *testing.T) {
	p, err := load(t, ovRecipe)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"source":                            "",
		"hf-perplexity:baseline":            "source",
		openvino.ExportStepID:               "source",
		"openvino-quantize:int4":            openvino.ExportStepID,
		"openvino-validate:int4":            "openvino-quantize:int4,source,hf-perplexity:baseline",
		"openvino-quantize:int8":            openvino.ExportStepID,
		"openvino-validate:int8":            "openvino-quantize:int8,source,hf-perplexity:baseline",
		"openvino-quantize:int4+g32+awq+n8": openvino.ExportStepID,
		"openvino-validate:int4+g32+awq+n8": "openvino-quantize:int4+g32+awq+n8,source,hf-perplexity:baseline",
		// Each compressed IR's decode check: the IR, then the one shared
		// reference of the unconverted model's generations.
		"generate:reference":                         "source",
		"openvino-decode:int4":                       "openvino-quantize:int4,generate:reference",
		"openvino-decode:int8":                       "openvino-quantize:int8,generate:reference",
		"openvino-decode:int4+g32+awq+n8":            "openvino-quantize:int4+g32+awq+n8,generate:reference",
		"contract:openvino-quantize:int4":            "source,openvino-quantize:int4",
		"publish:int4":                               "openvino-quantize:int4,openvino-validate:int4,openvino-decode:int4,contract:openvino-quantize:int4",
		"contract:openvino-quantize:int8":            "source,openvino-quantize:int8",
		"publish:int8":                               "openvino-quantize:int8,openvino-validate:int8,openvino-decode:int8,contract:openvino-quantize:int8",
		"contract:openvino-quantize:int4+g32+awq+n8": "source,openvino-quantize:int4+g32+awq+n8",
		"publish:awq": "openvino-quantize:int4+g32+awq+n8,openvino-validate:int4+g32+awq+n8,openvino-decode:int4+g32+awq+n8," +
			"contract:openvino-quantize:int4+g32+awq+n8",
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
	for id, want := range map[string]openvino.QuantizeParams{
		"openvino-quantize:int4": {WeightFormat: "int4", Sym: true, GroupSize: openvino.DefaultGroupSize, GroupSizeFallback: "adjust", Ratio: 1},
		"openvino-quantize:int8": {WeightFormat: "int8", Ratio: 1},
		"openvino-quantize:int4+g32+awq+n8": {WeightFormat: "int4", Sym: true, GroupSize: 32, GroupSizeFallback: "adjust", Ratio: 1, AWQ: true,
			Samples: 8, SeqLen: openvino.DefaultSeqLen},
	} {
		s, _ := p.Step(id)
		if q := s.Params.(*openvino.QuantizeParams); *q != want {
			t.Errorf("%s params %+v, want %+v", id, q, want)
		}
		if calibrated := s.Data["calibration"] != ""; calibrated != want.AWQ {
			t.Errorf("%s data %v", id, s.Data)
		}
	}
	s, _ := p.Step("openvino-decode:int8")
	if d := s.Params.(*shared.DecodeParams); *d != (shared.DecodeParams{MaxNewTokens: recipe.DefaultMaxNewTokens,
		MinTokenAgreement: recipe.DefaultMinTokenAgreement, MaxMeanKL: recipe.DefaultMaxMeanKL}) || s.Kind != "openvino-decode" {
		t.Errorf("decode %s params %+v", s.Kind, d)
	}
	s, _ = p.Step("openvino-validate:int8")
	if v := s.Params.(*openvino.ValidateParams); v.Precision != openvino.DefaultPrecision || v.Chunk != 512 || s.Data["eval"] == "" {
		t.Errorf("validate params %+v, data %v", v, s.Data)
	}
}

// A model that runs its own code passes trust_remote_code to both scripts.
func TestExpandTrustRemoteCode(t *testing.T) {
	p, err := load(t, strings.Replace(ovRecipe, "model: {source: builtin:smollm2-135m}", "model: {source: builtin:smollm2-135m, trust_remote_code: true}", 1))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := p.Step(openvino.ExportStepID)
	q, _ := p.Step("openvino-quantize:int8")
	if !s.Params.(*openvino.ExportParams).TrustRemoteCode || !q.Params.(*openvino.QuantizeParams).TrustRemoteCode {
		t.Errorf("export %+v, quantize %+v", s.Params, q.Params)
	}
}

func TestRefusedOptions(t *testing.T) {
	for _, tc := range []struct{ format, with, want string }{
		{"openvino-int4", "{group_size: 0}", "r.yaml:5:63: targets.t.with.group_size must be -1 (channel-wise) or a positive group"},
		{"openvino-int4", "{ratio: 1.5}", "targets.t.with.ratio must be in (0, 1]"},
		{"openvino-int4", "{calibration_samples: 8}", "targets.t.with.calibration_samples only applies to a data-aware method"},
		{"openvino-int4", "{mode: nf4}", `targets.t.with.mode is "nf4", which is not one of its values`},
		{"openvino-int4", "{calibration_seq_len: 4, gptq: true}", "targets.t.with.calibration_seq_len must be at least 8, not 4"},
		{"openvino-int8", "{awq: true}", `targets.t.with: unknown option "awq"`},
	} {
		_, err := load(t, `edgepipe: 1
name: npu
model: {source: builtin:smollm2-135m}
targets:
  t: {device: intel-lunar-lake, format: `+tc.format+`, with: `+tc.with+`}
`)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with %s: %v, want %q", tc.format, tc.with, err, tc.want)
		}
	}
}
