package gguf

import (
	"context"
	"fmt"
	"math"

	"github.com/edgepipe/edgepipe/steps"
)

// comparePerplexity checks that two backends scoring the same model on the
// same tokens agree: the F16 GGUF through llama.cpp against the Hugging
// Face checkpoint it came from through transformers. A disagreement means
// the conversion or the tokenizer changed the model, a bug that otherwise
// ships silently in every quantized type made from that GGUF.
type comparePerplexity struct{}

func (comparePerplexity) Name() string                  { return "compare-perplexity" }
func (comparePerplexity) Version() int                  { return 1 }
func (comparePerplexity) Tools(any) []string            { return nil }
func (comparePerplexity) Resources(any) steps.Resources { return steps.Resources{Cores: 1} }
func (comparePerplexity) NewParams() any                { return &CompareParams{} }

// CompareParams are a compare-perplexity step's.
type CompareParams struct {
	// MaxRelDiff is the relative difference the two perplexities may have.
	MaxRelDiff float64 `json:"max_rel_diff"`
}

// DefaultMaxRelDiff is the agreement asked of the F16 GGUF and its source.
const DefaultMaxRelDiff = 0.01

func (comparePerplexity) Run(ctx context.Context, sc *steps.Context) error {
	if len(sc.Inputs) != 2 {
		return fmt.Errorf("step %s compares exactly two perplexity steps, it has %d inputs", sc.StepID, len(sc.Inputs))
	}
	a, b := sc.Inputs[0], sc.Inputs[1]
	if a.Result.Perplexity == nil || b.Result.Perplexity == nil {
		return fmt.Errorf("step %s: %s or %s recorded no perplexity", sc.StepID, a.StepID, b.StepID)
	}
	pa, pb := a.Result.Perplexity.PPL, b.Result.Perplexity.PPL
	limit := steps.ParamsOf[CompareParams](sc.Params).MaxRelDiff
	rel := math.Abs(pa-pb) / pb
	sc.Result.SetMetric("ppl_a", pa)
	sc.Result.SetMetric("ppl_b", pb)
	sc.Result.SetMetric("rel_diff", rel)
	sc.Result.Checks = append(sc.Result.Checks, steps.Check{
		Name:   fmt.Sprintf("%s agrees with %s", a.StepID, b.StepID),
		Passed: rel <= limit,
		Detail: fmt.Sprintf("perplexity %.4f (%s) vs %.4f (%s): %.2f%% apart, limit %.2f%%", pa, backendOf(a), pb, backendOf(b), 100*rel, 100*limit),
	})
	return nil
}

func backendOf(in steps.Input) string {
	if in.Result != nil && in.Result.Perplexity != nil && in.Result.Perplexity.Backend != "" {
		return in.Result.Perplexity.Backend
	}
	return in.Kind
}
