package onnx

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// reference is a generate-reference step's output as its kind records it,
// for the golden decode report's 4 sequences of up to 64 tokens.
func reference() steps.Input {
	return steps.Input{StepID: "generate:reference", Kind: shared.GenerateReference.Name(), Dir: "/cache/ref",
		Result: &steps.Result{Files: map[string]string{"reference": "reference.json"},
			Metrics: map[string]float64{"max_new_tokens": 64, "sequences": 4}}}
}

func exportedWithPast() steps.Input {
	in := exported()
	in.Result.Facts = map[string]string{"kv_cache": "true"}
	return in
}

func quantized() steps.Input {
	return steps.Input{StepID: "onnx-quantize:int4", Kind: "onnx-quantize", Dir: "/cache/int4",
		Result: &steps.Result{Files: map[string]string{"model": "model.onnx"}}}
}

var decodeParams = &shared.DecodeParams{MaxNewTokens: 64, MinTokenAgreement: 0.5, MaxMeanKL: 1}

// decodeChecks runs onnx-decode on model with the decode helper's golden
// report, its decode_max_abs and decode_top1 set, and returns the
// decode consistency check.
func decodeChecks(t *testing.T, model steps.Input, maxAbs, top1 float64) (*fakeTools, steps.Check) {
	t.Helper()
	f := newFake(t, decodeParams, model, reference())
	f.reports[ToolDecode] = edit(golden(t, ToolDecode), map[string]string{
		"decode_max_abs": strconv.FormatFloat(maxAbs, 'g', -1, 64), "decode_top1": strconv.FormatFloat(top1, 'g', -1, 64)})
	if err := (onnxDecode{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.sc.Result.Checks {
		if c.Name == "decode consistency" {
			return f, c
		}
	}
	t.Fatalf("no decode consistency check in %+v", f.sc.Result.Checks)
	return nil, steps.Check{}
}

func TestDecodeArgvAndBounds(t *testing.T) {
	fp32, int4 := DecodeBounds["onnx-fp32"], DecodeBounds["onnx-int4"]
	if !(fp32.MaxAbs > 0 && int4.MaxAbs > 0 && fp32.MinTop1 > 0 && int4.MinTop1 > 0) {
		t.Fatalf("bounds %+v", DecodeBounds)
	}
	f, c := decodeChecks(t, exportedWithPast(), fp32.MaxAbs/2, 1)
	want := []string{"/opt/tools/onnx_decode.py", "--onnx", "/cache/export/model.onnx", "--reference", "/cache/ref/reference.json", "--threads", "2"}
	if len(f.argv) != 1 || !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q, want %q", f.argv, want)
	}
	g := f.sc.Result.Generation
	if !c.Passed || g == nil || g.DecodeBound == nil || *g.DecodeBound != fp32.MaxAbs || g.Sequences != 4 || !strings.Contains(g.Runtime, "ONNX Runtime") {
		t.Errorf("within the fp32 bound: %+v, generation %+v", c, g)
	}

	// Each format by its own bound: twice it fails, half of it passes.
	for _, tc := range []struct {
		model steps.Input
		bound shared.DecodeBound
	}{{exportedWithPast(), fp32}, {quantized(), int4}} {
		if _, c := decodeChecks(t, tc.model, 2*tc.bound.MaxAbs, 1); c.Passed || !strings.Contains(c.Detail, "decode path") {
			t.Errorf("%s at twice its bound passed: %+v", tc.model.StepID, c)
		}
		f, c := decodeChecks(t, tc.model, tc.bound.MaxAbs/2, 1)
		if !c.Passed || f.argv[0][2] != tc.model.Dir+"/model.onnx" || *f.sc.Result.Generation.DecodeBound != tc.bound.MaxAbs {
			t.Errorf("%s at half its bound: %+v, argv %q", tc.model.StepID, c, f.argv[0])
		}
	}
	// Top-1 below its share fails, however close the logits.
	if _, c := decodeChecks(t, quantized(), 0, int4.MinTop1-0.05); c.Passed {
		t.Errorf("top-1 under the bound passed: %+v", c)
	}
}

func TestDecodeRefusals(t *testing.T) {
	noPast := exported()
	noPast.Result.Facts = map[string]string{"kv_cache": "false"}
	for _, tc := range []struct {
		name   string
		inputs []steps.Input
		want   string
	}{
		{"not a model", []steps.Input{fetched("/models/src"), reference()}, "needs, first, the step that made the ONNX model"},
		{"another kind", []steps.Input{{StepID: "qnn-convert:x", Kind: "qnn-convert", Dir: "/cache/qnn",
			Result: &steps.Result{Files: map[string]string{"model": "model.onnx"}}}, reference()}, "not the output of qnn-convert:x (qnn-convert)"},
		{"no past", []steps.Input{noPast, reference()}, "exported the graph without one"},
		{"no reference", []steps.Input{exportedWithPast()}, "generate-reference"},
	} {
		f := newFake(t, decodeParams, tc.inputs...)
		err := (onnxDecode{}).Run(context.Background(), f.sc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if len(f.argv) != 0 {
			t.Errorf("%s: ran %q", tc.name, f.argv)
		}
	}
}
