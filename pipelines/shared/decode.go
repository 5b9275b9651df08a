package shared

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps"
)

// A family's decode check runs the artifact in its runtime (or the closest
// host equivalent) through a helper that feeds the reference sequences of
// a generate-reference step token by token through the runtime's KV cache
// and in one prefill (pipelines/pylib/decode_check.py), and judges what it
// reports: the decode against the prefill by the format's own bound
// (DecodeBound, written in the family beside the measurement it came
// from), and the decode against the unconverted model's greedy tokens by
// the recipe's quality.generation (DecodeParams). The family's kind
// supplies the helper and the artifact's arguments; RunDecode does the
// rest, so every family's decode check is judged and recorded alike.

// DecodeParams are every decode kind's: the recipe's quality.generation.
type DecodeParams struct {
	// MaxNewTokens is the reference's cap, checked against the
	// generate-reference step the decode step needs.
	MaxNewTokens      int     `json:"max_new_tokens"`
	MinTokenAgreement float64 `json:"min_token_agreement"`
	MaxMeanKL         float64 `json:"max_mean_kl"`
}

func (p *DecodeParams) check() error {
	switch {
	case p.MaxNewTokens < 1:
		return fmt.Errorf("max_new_tokens must be at least 1, not %d", p.MaxNewTokens)
	case !(p.MinTokenAgreement >= 0 && p.MinTokenAgreement <= 1):
		return fmt.Errorf("min_token_agreement must be a fraction from 0 to 1, not %v", p.MinTokenAgreement)
	case !(p.MaxMeanKL >= 0) || math.IsInf(p.MaxMeanKL, 0):
		return fmt.Errorf("max_mean_kl must be a finite number of 0 or more, not %v", p.MaxMeanKL)
	}
	return nil
}

// DecodeBound is a format's bound on decode consistency: the largest
// |decode logit - prefill logit| at any decoded position, and the least
// share of positions whose most likely tokens agree.
type DecodeBound struct {
	MaxAbs  float64
	MinTop1 float64
}

// Decode is a family's decode helper run: the tool and the arguments that
// name the artifact (--model DIR, ...); RunDecode adds --reference and
// --threads.
type Decode struct {
	Tool  string
	Args  []string
	Bound DecodeBound
}

// RunDecode runs a family's decode helper on the step's reference and
// records its measurement and verdicts in sc.Result.
func RunDecode(ctx context.Context, sc *steps.Context, d Decode) error {
	p := steps.ParamsOf[DecodeParams](sc.Params)
	if err := p.check(); err != nil {
		return fmt.Errorf("step %s: %w (quality.generation)", sc.StepID, err)
	}
	ref, err := sc.Input(GenerateReference)
	if err != nil {
		return err
	}
	if ref.Result == nil || ref.Result.Files["reference"] == "" {
		return fmt.Errorf("the reference step %s recorded no reference file", ref.StepID)
	}
	if got := int(ref.Result.Metrics["max_new_tokens"]); got != p.MaxNewTokens {
		return fmt.Errorf("step %s: the reference %s generated up to %d tokens a sequence, this check was planned for %d", sc.StepID, ref.StepID, got, p.MaxNewTokens)
	}
	args := append(append([]string{}, d.Args...), "--reference", filepath.Join(ref.Dir, ref.Result.Files["reference"]),
		"--threads", strconv.Itoa(sc.NumThreads()))
	if err := sc.RunTool(ctx, d.Tool, args...); err != nil {
		return err
	}
	var rep report.Decode
	if err := steps.ReadReport(d.Tool, sc.LogPath, &rep); err != nil {
		return err
	}
	if want := int(ref.Result.Metrics["sequences"]); rep.Sequences != want || rep.MaxNewTokens != p.MaxNewTokens {
		return fmt.Errorf("%s decoded %d sequences of at most %d tokens, the reference %s has %d of at most %d (see %s)",
			d.Tool, rep.Sequences, rep.MaxNewTokens, ref.StepID, want, p.MaxNewTokens, sc.LogPath)
	}
	return RecordDecode(sc.Result, rep, *p, d.Bound)
}

// RecordDecode records a decode helper's report as the step's Generation
// and its two verdicts as checks: decode consistency against the format's
// bound, generation agreement against the recipe's. A number that is not
// finite (null in the report) fails its check.
func RecordDecode(res *steps.Result, rep report.Decode, p DecodeParams, b DecodeBound) error {
	if rep.Steps < 1 || rep.Sequences < 1 {
		return fmt.Errorf("the decode helper compared %d steps of %d sequences: nothing was checked", rep.Steps, rep.Sequences)
	}
	g := &steps.Generation{Runtime: rep.Runtime, Sequences: rep.Sequences, Steps: rep.Steps, MaxNewTokens: rep.MaxNewTokens,
		TokenAgreement: rep.TokenAgreement, FirstDivergence: rep.FirstDivergence, MeanKL: rep.MeanKL,
		StopsLikeOriginal: rep.StopsLikeOriginal, CrossesWindow: rep.CrossesWindow,
		MinTokenAgreement: p.MinTokenAgreement, MaxMeanKL: p.MaxMeanKL}
	res.Generation = g
	res.SetFact("decode_runtime", rep.Runtime)
	if rep.NotApplicable != nil {
		g.NotApplicable = *rep.NotApplicable
		res.SetFact("decode_consistency", "not applicable: "+*rep.NotApplicable)
	} else {
		maxAbs, minTop1 := b.MaxAbs, b.MinTop1
		g.DecodeMaxAbs, g.DecodeTop1, g.DecodeBound, g.DecodeMinTop1 = rep.DecodeMaxAbs, rep.DecodeTop1, &maxAbs, &minTop1
		res.Checks = append(res.Checks, decodeConsistency(rep, b))
	}
	res.Checks = append(res.Checks, generationAgreement(rep, p))
	return nil
}

func decodeConsistency(rep report.Decode, b DecodeBound) steps.Check {
	c := steps.Check{Name: "decode consistency"}
	if rep.DecodeMaxAbs == nil || rep.DecodeTop1 == nil {
		c.Detail = fmt.Sprintf("the KV-cache decode gave logits that are not finite over %d positions: its decode path is broken", rep.Steps)
		return c
	}
	c.Passed = *rep.DecodeMaxAbs <= b.MaxAbs && *rep.DecodeTop1 >= b.MinTop1
	c.Detail = fmt.Sprintf("token-by-token decode through the KV cache against one-pass prefill at %d positions: max |logit difference| %.3g (bound %.3g), same top-1 %s (min %s)",
		rep.Steps, *rep.DecodeMaxAbs, b.MaxAbs, percent(*rep.DecodeTop1), percent(b.MinTop1))
	if !c.Passed {
		c.Detail += ": the artifact's decode path does not compute what its prefill does (a KV cache fed at the wrong position, a stale or truncated cache)"
	}
	return c
}

func generationAgreement(rep report.Decode, p DecodeParams) steps.Check {
	c := steps.Check{Name: "generation agreement"}
	first := "no step diverged"
	if rep.FirstDivergence != nil {
		first = fmt.Sprintf("first divergence at step %d", *rep.FirstDivergence)
	}
	stops := ""
	if s := rep.StopsLikeOriginal; s != nil {
		stops = "; stops at EOS where the original did"
		if !*s {
			stops = "; does not stop at EOS where the original did"
		}
	}
	if rep.MeanKL == nil {
		c.Detail = fmt.Sprintf("token agreement %s, but the mean KL divergence from the original is not finite: the artifact gives no usable probabilities", percent(rep.TokenAgreement))
		return c
	}
	c.Passed = rep.TokenAgreement >= p.MinTokenAgreement && *rep.MeanKL <= p.MaxMeanKL
	c.Detail = fmt.Sprintf("against the original's greedy tokens over %d steps of %d sequences: token agreement %s (min %s), mean KL %.4f (max %g), %s%s",
		rep.Steps, rep.Sequences, percent(rep.TokenAgreement), percent(p.MinTokenAgreement), *rep.MeanKL, p.MaxMeanKL, first, stops)
	if !c.Passed {
		c.Detail += ": raise quality.generation's bounds only if this drift is acceptable"
	}
	return c
}

func percent(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }
