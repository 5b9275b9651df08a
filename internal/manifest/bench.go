package manifest

import (
	"fmt"
	"math"
)

// validate reports bench figures no measurement can give: negative or
// non-finite numbers, percentiles out of order, no timed run.
func (b *Bench) validate() []error {
	var errs []error
	nums := map[string]float64{
		"token_p50_ms": b.TokenP50MS, "token_p95_ms": b.TokenP95MS, "token_p99_ms": b.TokenP99MS,
		"first_token_ms": b.FirstTokenMS, "prompt_tok_s": b.PromptTokS, "decode_tok_s": b.DecodeTokS,
	}
	for name, p := range map[string]*float64{"host_bandwidth_gb_s": b.HostBandwidthGBs, "host_ceiling_tok_s": b.HostCeilingTokS, "efficiency": b.Efficiency} {
		if p != nil {
			nums[name] = *p
		}
	}
	for name, v := range nums {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			errs = append(errs, fmt.Errorf("metrics.bench.%s is %v", name, v))
		}
	}
	if b.TimedRuns < 1 {
		errs = append(errs, fmt.Errorf("metrics.bench.timed_runs is %d: a bench has at least one timed run", b.TimedRuns))
	}
	if !(b.TokenP50MS <= b.TokenP95MS && b.TokenP95MS <= b.TokenP99MS) {
		errs = append(errs, fmt.Errorf("metrics.bench percentiles out of order: p50 %v, p95 %v, p99 %v", b.TokenP50MS, b.TokenP95MS, b.TokenP99MS))
	}
	return errs
}
