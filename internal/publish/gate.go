package publish

import (
	"errors"
	"fmt"
	"github.com/edgepipe/edgepipe/internal/pplstat"
	"math"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/steps"
)

// GateResult is a target's quality gate: perplexity of the converted model
// against the unconverted baseline, on the same tokens.
type GateResult struct {
	Target    string  `json:"target"`
	Baseline  float64 `json:"baseline"`
	Converted float64 `json:"converted"`
	Delta     float64 `json:"delta"`
	Ratio     float64 `json:"ratio"`
	WarnDelta float64 `json:"warn_delta"`
	MaxDelta  float64 `json:"max_delta"`
	Verdict   string  `json:"verdict"`
	Step      string  `json:"step"`
	// Low and High bound the delta at 95% when the check step measured
	// it; TokensToDecide is set when they straddle MaxDelta.
	Low            *float64 `json:"delta_low,omitempty"`
	High           *float64 `json:"delta_high,omitempty"`
	Interval       string   `json:"interval,omitempty"`
	TokensToDecide int      `json:"tokens_to_decide,omitempty"`
	tokens         int
}

// withInterval takes the check step's interval into the gate's record.
func (g *GateResult) withInterval(p *steps.Perplexity) {
	if p.DeltaLow == nil || p.DeltaHigh == nil {
		return
	}
	g.Low, g.High, g.Interval, g.tokens = p.DeltaLow, p.DeltaHigh, p.Interval, p.EvalTokens
	g.TokensToDecide = pplstat.TokensToDecide(pplstat.Interval{Delta: g.Delta, Low: *p.DeltaLow, High: *p.DeltaHigh, Tokens: p.EvalTokens}, g.MaxDelta)
}

// DeltaText is the delta with its interval, "+0.412 [+0.301, +0.523]".
func (g *GateResult) DeltaText() string {
	if g.Low == nil || g.High == nil {
		return fmt.Sprintf("%+.4f", g.Delta)
	}
	return fmt.Sprintf("%+.4f [%+.4f, %+.4f]", g.Delta, *g.Low, *g.High)
}

// undecided says, when the interval straddles max_delta, how many more
// scored tokens would decide the verdict.
func (g *GateResult) undecided() string {
	if g.TokensToDecide <= 0 {
		return ""
	}
	return fmt.Sprintf("; its 95%% interval straddles max_delta %.2f: about %d scored tokens (now %d) would decide it (quality.perplexity.max_chunks: 0 scores the whole text; a longer data.eval scores more)",
		g.MaxDelta, g.TokensToDecide, g.tokens)
}

// GateError is a target whose quality gate failed: nothing was published.
// Gate is set for a perplexity gate; Check for any other validation.
type GateError struct {
	Target string
	Gate   *GateResult
	// Accuracy is set for an image classifier's accuracy gate.
	Accuracy *AccuracyResult
	// Agreement is set for an image classifier's agreement gate.
	Agreement *AgreementResult
	Check     *steps.Check
	Step      string
	// Earlier is the target's folder when an earlier run published there:
	// it is left as it was (nothing already done is destroyed), but it is
	// not this recipe's result, and the message says so.
	Earlier string
}

func (e *GateError) Error() string {
	var msg string
	if e.Accuracy != nil {
		msg = e.Accuracy.failure()
	} else if e.Agreement != nil {
		msg = e.Agreement.failure()
	} else if e.Check != nil {
		msg = fmt.Sprintf("target %s failed its quality gate: check %q of step %s failed: %s; nothing was published",
			e.Target, e.Check.Name, e.Step, e.Check.Detail)
	} else {
		g := e.Gate
		msg = fmt.Sprintf("target %s failed its quality gate: perplexity %.4f against baseline %.4f is a delta of %s, over max_delta %.2f%s; nothing was published. Investigate the conversion (a delta over 2.0 usually means it is broken), use more bits, or raise quality.perplexity.max_delta for this target if the loss is acceptable",
			g.Target, g.Converted, g.Baseline, g.DeltaText(), g.MaxDelta, g.undecided())
	}
	if e.Earlier != "" {
		msg += fmt.Sprintf(". %s still holds an earlier run's artifacts, which this run did not replace: they are not this recipe's result (delete the folder if nothing may pick them up)", e.Earlier)
	}
	return msg
}

// Contained marks a gate failure as a verdict on its own target: under
// fail-fast, other targets still convert and publish (the run exits 3).
func (e *GateError) Contained() bool { return true }

// Judge applies the domain brief's thresholds: under warn_delta is
// excellent, over max_delta is a failure. A perplexity that is not a
// finite number, on either side, fails: its delta would be NaN (neither
// over max_delta nor under warn_delta, so "ok") or infinite.
func Judge(baseline, converted, warnDelta, maxDelta float64) (delta, ratio float64, verdict string) {
	delta = converted - baseline
	ratio = converted / baseline
	switch {
	case !finite(baseline) || !finite(converted) || delta > maxDelta:
		verdict = manifest.VerdictFail
	case delta < warnDelta:
		verdict = manifest.VerdictExcellent
	default:
		verdict = manifest.VerdictOK
	}
	return delta, ratio, verdict
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// IsGateFailure reports whether err is (or wraps) a failed quality gate.
func IsGateFailure(err error) bool {
	var ge *GateError
	return errors.As(err, &ge)
}
