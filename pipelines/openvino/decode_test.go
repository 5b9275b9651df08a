package openvino

import (
	"context"
	"os"
	"path/filepath"
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

func compressed() steps.Input {
	return steps.Input{StepID: "openvino-quantize:int4", Kind: "openvino-quantize", Dir: "/cache/int4",
		Result: &steps.Result{Files: map[string]string{"model": ModelFile}}}
}

var decodeParams = &shared.DecodeParams{MaxNewTokens: 64, MinTokenAgreement: 0.5, MaxMeanKL: 1}

// decodeCheck runs openvino-decode with the decode helper's golden report,
// its decode_max_abs and decode_top1 set, and returns the decode
// consistency check.
func decodeCheck(t *testing.T, maxAbs, top1 float64) (*fakeTools, steps.Check) {
	t.Helper()
	f := newFake(t, decodeParams, compressed(), reference())
	b, err := os.ReadFile(filepath.Join("python", "reports", "openvino_decode.json"))
	if err != nil {
		t.Fatal(err)
	}
	f.reports[ToolDecode] = edit(strings.TrimSpace(string(b)), map[string]string{
		"decode_max_abs": strconv.FormatFloat(maxAbs, 'g', -1, 64), "decode_top1": strconv.FormatFloat(top1, 'g', -1, 64)})
	if err := (ovDecode{}).Run(context.Background(), f.sc); err != nil {
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

func TestDecodeArgvAndBound(t *testing.T) {
	if !(DecodeBound.MaxAbs > 0 && DecodeBound.MinTop1 > 0) {
		t.Fatalf("bound %+v", DecodeBound)
	}
	f, c := decodeCheck(t, DecodeBound.MaxAbs/2, 1)
	want := []string{"/opt/tools/openvino_decode.py", "--ir", "/cache/int4", "--reference", "/cache/ref/reference.json", "--threads", "2"}
	if len(f.argv) != 1 || !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q, want %q", f.argv, want)
	}
	g := f.sc.Result.Generation
	if !c.Passed || g == nil || g.DecodeBound == nil || *g.DecodeBound != DecodeBound.MaxAbs || g.Sequences != 4 || !strings.Contains(g.Runtime, "OpenVINO") {
		t.Errorf("within the bound: %+v, generation %+v", c, g)
	}
	if _, c := decodeCheck(t, 2*DecodeBound.MaxAbs, 1); c.Passed || !strings.Contains(c.Detail, "decode path") {
		t.Errorf("twice the bound passed: %+v", c)
	}
	if _, c := decodeCheck(t, 0, DecodeBound.MinTop1-0.05); c.Passed {
		t.Errorf("top-1 under the bound passed: %+v", c)
	}
}

func TestDecodeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inputs []steps.Input
		want   string
	}{
		// The export alone is not what a target ships: the decode check
		// reads the compressed IR.
		{"the export", []steps.Input{exported(), reference()}, `needs an input from a "openvino-quantize" step`},
		{"a checkpoint", []steps.Input{fetched(), reference()}, `needs an input from a "openvino-quantize" step`},
		{"no reference", []steps.Input{compressed()}, "generate-reference"},
	} {
		f := newFake(t, decodeParams, tc.inputs...)
		err := (ovDecode{}).Run(context.Background(), f.sc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if len(f.argv) != 0 {
			t.Errorf("%s: ran %q", tc.name, f.argv)
		}
	}
}
