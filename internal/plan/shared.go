// Helpers the families' expanders share.

package plan

import (
	"fmt"
	"reflect"
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

// OptionSuffix copies the options named in keys that a target set (a
// pointer field that is not nil, or a bool that is true) from its typed
// options into params, and spells them in a step id suffix ("+opset=17"),
// so targets that differ only in options get their own steps instead of
// silently sharing one.
func OptionSuffix(opts any, params steps.Params, keys ...string) string {
	set := SetOptions(opts)
	var parts []string
	for _, k := range keys {
		if val, ok := set[k]; ok {
			params[k] = val
			parts = append(parts, fmt.Sprintf("%s=%v", k, val))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return ""
	}
	return "+" + strings.Join(parts, "+")
}

func SameEval(a, b steps.Params) bool {
	return a.Int("context", 0) == b.Int("context", 0) && a.Int("max_chunks", 0) == b.Int("max_chunks", 0)
}

// SetOptions returns the options a target set, by key: pointer fields
// that are not nil, and bools that are true.
func SetOptions(opts any) map[string]any {
	set := map[string]any{}
	if opts == nil {
		return set
	}
	v := reflect.ValueOf(opts).Elem()
	for _, f := range recipe.OptionFields(opts) {
		fv := v.FieldByIndex(f.Index())
		switch {
		case fv.Kind() == reflect.Pointer && !fv.IsNil():
			set[f.Key] = fv.Elem().Interface()
		case fv.Kind() == reflect.Bool && fv.Bool():
			set[f.Key] = true
		}
	}
	return set
}
