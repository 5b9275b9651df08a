package publish

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/steps"
)

// benchOutput returns the bench step's output among a publish step's
// inputs, if the target has one.
func benchOutput(ins []*steps.Output) *steps.Output {
	for _, in := range ins {
		if in.Kind == "bench" && in.Result != nil {
			return in
		}
	}
	return nil
}

// ManifestBench is the bench step's result as the manifest records it.
func ManifestBench(out *steps.Output) *manifest.Bench {
	m := out.Result.Metrics
	b := &manifest.Bench{
		Backend:      out.Result.Facts["backend"],
		Host:         out.Result.Facts["host"],
		WarmupRuns:   int(m["warmup_runs"]),
		TimedRuns:    int(m["timed_runs"]),
		PromptTokens: int(m["prompt_tokens"]),
		DecodeTokens: int(m["decode_tokens"]),
		Threads:      int(m["threads"]),
		ModelBytes:   int64(m["model_bytes"]),
		TokenP50MS:   m["token_p50_ms"],
		TokenP95MS:   m["token_p95_ms"],
		TokenP99MS:   m["token_p99_ms"],
		FirstTokenMS: m["first_token_ms"],
		PromptTokS:   m["prompt_tok_s"],
		DecodeTokS:   m["decode_tok_s"],
	}
	opt := func(name string) *float64 {
		if v, ok := m[name]; ok {
			return &v
		}
		return nil
	}
	b.HostBandwidthGBs = opt("host_bandwidth_gb_s")
	b.HostCeilingTokS = opt("host_ceiling_tok_s")
	b.Efficiency = opt("efficiency")
	return b
}

// budgetChecks judges a target's speed budgets against its bench: decode
// tok/s against min_tokens_per_s, time to first token against
// max_first_token_ms. The bench measures this host, so these budgets are
// the host's when bench is on. Without a bench there is nothing to judge
// (plan time already checked min_tokens_per_s against the ceiling).
func budgetChecks(t *recipe.Target, bench *steps.Output) []steps.Check {
	if t == nil || bench == nil {
		return nil
	}
	m := bench.Result.Metrics
	host := bench.Result.Facts["host"]
	var out []steps.Check
	if t.MinTokensPerS > 0 {
		if v, ok := m["decode_tok_s"]; ok {
			out = append(out, steps.Check{Name: "budget min_tokens_per_s", Passed: v >= t.MinTokensPerS,
				Detail: fmt.Sprintf("measured decode %.4g tok/s on this host (%s) against min_tokens_per_s %g", v, host, t.MinTokensPerS)})
		}
	}
	if t.MaxFirstTokenMS > 0 {
		if v, ok := m["first_token_ms"]; ok {
			out = append(out, steps.Check{Name: "budget max_first_token_ms", Passed: v <= t.MaxFirstTokenMS,
				Detail: fmt.Sprintf("measured time to first token %.4g ms for a %d-token prompt on this host (%s) against max_first_token_ms %g",
					v, int(m["prompt_tokens"]), host, t.MaxFirstTokenMS)})
		}
	}
	return out
}

// fillBudgetActuals records what the bench measured beside the budgets'
// limits and predictions.
func fillBudgetActuals(b *manifest.Budgets, bench *manifest.Bench) {
	if b == nil || bench == nil {
		return
	}
	if b.MinTokensPerS != nil {
		v := bench.DecodeTokS
		b.MinTokensPerS.Actual = &v
	}
	if b.MaxFirstTokenMS != nil {
		v := bench.FirstTokenMS
		b.MaxFirstTokenMS.Actual = &v
	}
}
