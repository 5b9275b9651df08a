// Helpers the families' expanders share.

package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/steps"
)

// HFBaseline adds (or shares) the transformers perplexity of the
// unconverted checkpoint for the target's perplexity settings: the
// baseline of every family not scored by llama.cpp (ONNX, QNN, GPTQ, AWQ).
func HFBaseline(r *recipe.Recipe, t *recipe.Target, add AddFunc) *Step {
	ppl := t.Quality.Perplexity
	params := steps.Params{"context": ppl.Context, "max_chunks": ppl.MaxChunks}
	baseline := add(&Step{ID: HFBaselineStepID, Kind: "hf-perplexity", Needs: []string{SourceStepID},
		Params: params, Data: map[string]string{"eval": r.Data.Eval}}, t.Name)
	// A baseline only compares with a model scored on the same context and
	// chunks; a target asking for others gets its own.
	if !SameEval(baseline.Params, params) {
		baseline = add(&Step{ID: fmt.Sprintf("%s@c%dn%d", HFBaselineStepID, ppl.Context, ppl.MaxChunks), Kind: "hf-perplexity",
			Needs: []string{SourceStepID}, Params: params, Data: map[string]string{"eval": r.Data.Eval}}, t.Name)
	}
	return baseline
}

// WithSuffix copies the target's options named in keys into params and
// spells them in a step id suffix, so targets that differ only in options
// get their own steps instead of silently sharing one.
func WithSuffix(t *recipe.Target, keys []string, params steps.Params) string {
	var opts []string
	for _, k := range keys {
		if v, ok := t.With[k]; ok {
			params[k] = v
			opts = append(opts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	sort.Strings(opts)
	if len(opts) == 0 {
		return ""
	}
	return "+" + strings.Join(opts, "+")
}

func SameEval(a, b steps.Params) bool {
	return a.Int("context", 0) == b.Int("context", 0) && a.Int("max_chunks", 0) == b.Int("max_chunks", 0)
}

func BoolWith(with map[string]any, key string) bool {
	v, _ := with[key].(bool)
	return v
}
