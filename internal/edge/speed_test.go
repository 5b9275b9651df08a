package edge

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

func TestDecodeSpeedBriefFigures(t *testing.T) {
	for _, tc := range []struct {
		device             string
		ceiling, expected  float64
		observationMention string
	}{
		{"apple-a18", 12.77, 8, "8 tok/s for 8B Q4 (4.7 GB, platform guide) is 63% of its ceiling"},
		{"snapdragon-8-gen-3", 16.38, 7, "43%"},
		{"webgpu-m3-max", 85.11, 41, "48%"},
		{"jetson-thor", 58.09, 0, ""},                                                              // no observation: no expectation
		{"jetson-agx-orin", 43.62, 43.62, "103% of its ceiling, so the prediction is the ceiling"}, // observed 45: capped
	} {
		s := DecodeSpeed(mustDevice(t, tc.device), 4.7)
		if !near(s.CeilingTokS, tc.ceiling) || !near(s.ExpectedTokS, tc.expected) || !strings.Contains(s.Observation, tc.observationMention) {
			t.Errorf("%s: %+v, want ceiling %v, expected %v", tc.device, s, tc.ceiling, tc.expected)
		}
	}
	// An observation with no usable size (a mixture of experts) sets no share.
	agx := mustDevice(t, "jetson-agx-orin")
	agx.Observed = agx.Observed[1:]
	if s := DecodeSpeed(agx, 4.7); s.ExpectedTokS != 0 {
		t.Errorf("gpt-oss-20b's observation set an expectation: %+v", s)
	}
}

// Each speed fix, applied, reaches the budget it was made for.
func TestEverySpeedFixReachesTheBudget(t *testing.T) {
	for _, tc := range []struct {
		device, format string
		minTokS, share float64
	}{
		{"apple-a18", "coreml-int4", 10, 0.627}, // the brief's 3 tok/s iPhone case
		{"apple-a18", "gguf-q4_0", 20, 1},
		{"snapdragon-8-gen-3", "qnn-w8a16", 15, 1},
		{"jetson-orin-nano-super", "gguf-q8_0", 30, 1},
	} {
		d, f := mustDevice(t, tc.device), mustFormat(t, tc.format)
		fixes := speedFixes(d, llama3Params, f, tc.minTokS, tc.share)
		if len(fixes) != 2 {
			t.Fatalf("%+v: fixes %v", tc, fixes)
		}
		for _, fix := range fixes {
			params, format := int64(llama3Params), f
			switch {
			case fix.Change == "a smaller model":
				params = parseParams(t, fix.Effect)
			case strings.HasPrefix(fix.Change, "fewer bits: format: "):
				format = mustFormat(t, strings.TrimPrefix(fix.Change, "fewer bits: format: "))
				if !d.Runs(format.Name) {
					t.Errorf("%s does not run %s", d.ID, format.Name)
				}
			default:
				t.Errorf("%+v: unexpected fix %s", tc, fix)
				continue
			}
			got := catalog.DecodeCeiling(d.MemoryBandwidthGBs, catalog.EstimateWeightsGB(params, format)) * tc.share
			if got < tc.minTokS {
				t.Errorf("%+v: fix %s gives %.2f tok/s", tc, fix, got)
			}
		}
	}
}

func TestSpeedFixWithoutAFewerBitsFormat(t *testing.T) {
	// 1000 tok/s on a phone would take well under one bit a weight.
	fixes := speedFixes(mustDevice(t, "apple-a18"), llama3Params, mustFormat(t, "coreml-int4"), 1000, 1)
	if len(fixes) != 2 || fixes[1].Change != "fewer bits" || !strings.Contains(fixes[1].Effect, "fewer than any format apple-a18 runs") {
		t.Errorf("fixes %v", fixes)
	}
}
