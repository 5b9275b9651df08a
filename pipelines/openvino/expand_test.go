package openvino

import (
	"slices"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// A target that sets nothing gets Intel's NPU settings; one that sets an
// option gets a step of its own, spelled in its id.
func TestQuantizeDefaultsAndIDs(t *testing.T) {
	p := quantizeParams(FormatInt4, &Int4Options{}, false)
	if p.WeightFormat != "int4" || !p.Sym || p.GroupSize != 128 || p.GroupSizeFallback != "adjust" || p.Ratio != 1 || p.dataAware() || p.Samples != 0 {
		t.Errorf("int4 defaults %+v", p)
	}
	if err := p.check(); err != nil {
		t.Error(err)
	}
	if got := quantizeSuffix(FormatInt4, &Int4Options{}); got != "int4" {
		t.Errorf("suffix %q", got)
	}
	o := &Int4Options{Mode: ptr("asym"), GroupSize: ptr(-1), AWQ: ptr(true), ScaleEstimation: ptr(true), AllLayers: ptr(false), Samples: ptr(8)}
	if got := quantizeSuffix(FormatInt4, o); got != "int4+asym+g-1+no-all+awq+se+n8" {
		t.Errorf("suffix %q", got)
	}
	p = quantizeParams(FormatInt4, o, true)
	if p.Sym || p.GroupSize != -1 || !p.AWQ || !p.ScaleEstimation || p.Samples != 8 || p.SeqLen != DefaultSeqLen || !p.TrustRemoteCode {
		t.Errorf("params %+v", p)
	}
	args := p.args("IN", "OUT", "cal.txt", 2)
	for _, want := range []string{"--awq", "--scale-estimation", "--trust-remote-code", "--calibration", "cal.txt", "-1"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	if slices.Contains(args, "--sym") || slices.Contains(args, "--gptq") {
		t.Errorf("args %v", args)
	}

	p8 := quantizeParams(FormatInt8, &Int8Options{}, false)
	if p8.WeightFormat != "int8" || p8.Sym || p8.Ratio != 1 {
		t.Errorf("int8 defaults %+v", p8)
	}
	if a := strings.Join(p8.args("IN", "OUT", "", 1), " "); strings.Contains(a, "--group-size") {
		t.Errorf("int8 args %q", a)
	}
}

func TestCheckOptionsAndParams(t *testing.T) {
	probs := (&Int4Options{Ratio: ptr(1.5), GroupSize: ptr(0), SeqLen: ptr(64)}).CheckOptions()
	var keys []string
	for _, p := range probs {
		keys = append(keys, p.Key)
	}
	if strings.Join(keys, ",") != "group_size,ratio,calibration_seq_len" {
		t.Errorf("problems %+v", probs)
	}
	if probs := (&Int4Options{GPTQ: ptr(true), Samples: ptr(4)}).CheckOptions(); len(probs) != 0 {
		t.Errorf("problems %+v", probs)
	}
	for _, bad := range []QuantizeParams{
		{WeightFormat: "int3", Ratio: 1},
		{WeightFormat: "int4", GroupSize: -2, GroupSizeFallback: "adjust", Ratio: 1},
		{WeightFormat: "int4", GroupSize: 64, GroupSizeFallback: "round", Ratio: 1},
		{WeightFormat: "int4", GroupSize: 64, GroupSizeFallback: "adjust", Ratio: 0},
		{WeightFormat: "int8", Ratio: 1, AWQ: true, Samples: 1, SeqLen: 8},
		{WeightFormat: "int4", GroupSize: 64, GroupSizeFallback: "adjust", Ratio: 1, GPTQ: true},
	} {
		if err := bad.check(); err == nil {
			t.Errorf("%+v passed", bad)
		}
	}
}
