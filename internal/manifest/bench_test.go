package manifest

import (
	"math"
	"strings"
	"testing"
)

func TestBenchValidate(t *testing.T) {
	bw := 6.5
	good := Bench{Backend: "llama.cpp", TimedRuns: 50, TokenP50MS: 10, TokenP95MS: 12, TokenP99MS: 15,
		FirstTokenMS: 60, PromptTokS: 2000, DecodeTokS: 95, HostBandwidthGBs: &bw}
	if errs := good.validate(); len(errs) != 0 {
		t.Errorf("a sane bench: %v", errs)
	}
	nan := math.NaN()
	for name, c := range map[string]struct {
		mutate func(b *Bench)
		want   string
	}{
		"percentiles": {func(b *Bench) { b.TokenP95MS = 20 }, "out of order"},
		"negative":    {func(b *Bench) { b.DecodeTokS = -1 }, "decode_tok_s is -1"},
		"nan pointer": {func(b *Bench) { b.Efficiency = &nan }, "efficiency is NaN"},
		"no runs":     {func(b *Bench) { b.TimedRuns = 0 }, "timed_runs is 0"},
	} {
		b := good
		c.mutate(&b)
		errs := b.validate()
		found := false
		for _, e := range errs {
			found = found || strings.Contains(e.Error(), c.want)
		}
		if !found {
			t.Errorf("%s: errors %v, want one with %q", name, errs, c.want)
		}
	}
}
