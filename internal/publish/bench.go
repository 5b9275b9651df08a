package publish

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/steps"
)

// benchOutput returns what the bench step measured among a publish
// step's inputs, if the target has one.
func benchOutput(ins []*steps.Output) (*steps.Output, *manifest.Bench) {
	for _, in := range ins {
		if in.Result != nil && in.Result.Bench != nil {
			return in, in.Result.Bench
		}
	}
	return nil, nil
}

// visionBench returns what an image classifier's bench measured among a
// publish step's inputs, if the target has one.
func visionBench(ins []*steps.Output) *manifest.VisionBench {
	for _, in := range ins {
		if in.Result != nil && in.Result.VisionBench != nil {
			return in.Result.VisionBench
		}
	}
	return nil
}

// budgetChecks judges a target's speed budgets against its bench: decode
// tok/s against min_tokens_per_s, time to first token against
// max_first_token_ms. The bench measures this host, so these budgets are
// the host's when bench is on. Without a bench there is nothing to judge
// (plan time already checked min_tokens_per_s against the ceiling).
func budgetChecks(t *Params, b *manifest.Bench) []steps.Check {
	if t == nil || b == nil {
		return nil
	}
	var out []steps.Check
	if t.MinTokensPerS > 0 {
		out = append(out, steps.Check{Name: "budget min_tokens_per_s", Passed: b.DecodeTokS >= t.MinTokensPerS,
			Detail: fmt.Sprintf("measured decode %.4g tok/s on this host (%s) against min_tokens_per_s %g", b.DecodeTokS, b.Host, t.MinTokensPerS)})
	}
	if t.MaxFirstTokenMS > 0 {
		out = append(out, steps.Check{Name: "budget max_first_token_ms", Passed: b.FirstTokenMS <= t.MaxFirstTokenMS,
			Detail: fmt.Sprintf("measured time to first token %.4g ms for a %d-token prompt on this host (%s) against max_first_token_ms %g",
				b.FirstTokenMS, b.PromptTokens, b.Host, t.MaxFirstTokenMS)})
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
