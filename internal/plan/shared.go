// Helpers the families' expanders share.

package plan

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// HFBaseline adds (or shares) the transformers perplexity of the
// unconverted checkpoint for the target's perplexity settings: the
// baseline of every family not scored by llama.cpp (ONNX, QNN, GPTQ, AWQ).
func HFBaseline(r *recipe.Recipe, t *recipe.Target, add AddFunc) *Step {
	ev := EvalOf(t.Quality.Perplexity)
	baseline := add(&Step{ID: HFBaselineStepID, Kind: "hf-perplexity", Needs: []string{SourceStepID},
		Params: &ev, Data: EvalData(r)}, t.Name)
	// A baseline only compares with a model scored on the same context and
	// chunks; a target asking for others gets its own.
	if *baseline.Params.(*steps.Eval) != ev {
		baseline = add(&Step{ID: fmt.Sprintf("%s@c%dn%d", HFBaselineStepID, ev.Chunk, ev.MaxChunks), Kind: "hf-perplexity",
			Needs: []string{SourceStepID}, Params: &ev, Data: EvalData(r)}, t.Name)
	}
	return baseline
}

// ReferenceStepID generates the unconverted model's greedy tokens from the
// built-in chat prompts: the reference of every target's decode check.
const ReferenceStepID = "generate:reference"

// ChatPrompts are the prompts the reference generates from.
const ChatPrompts = "builtin:chat-prompts"

// GenerationReference adds (or shares) the reference generation for the
// target's max_new_tokens: one per recipe unless targets ask for other
// lengths.
func GenerationReference(r *recipe.Recipe, t *recipe.Target, add AddFunc) *Step {
	n := generationGate(t).MaxNewTokens
	id := ReferenceStepID
	if n != recipe.DefaultMaxNewTokens {
		id += fmt.Sprintf("@n%d", n)
	}
	// The evaluation text is where a sliding-window model's window
	// passage comes from.
	return add(&Step{ID: id, Kind: "generate-reference", Needs: []string{SourceStepID},
		Params: &shared.GenerateParams{MaxNewTokens: n},
		Data:   map[string]string{steps.DataPrompts: ChatPrompts, steps.DataEval: r.Data.Eval}}, t.Name)
}

// GenerationCheck adds target t's decode check: a step of the family's
// decode kind, id KIND:OF (OF names what it decodes, the model step's id
// or a part of it), that needs the reference and the steps in needs, and
// judges the target's quality.generation bounds. Targets that decode the
// same model with the same bounds share it; other bounds or another
// max_new_tokens are spelled in the id.
func GenerationCheck(r *recipe.Recipe, t *recipe.Target, add AddFunc, kind, of string, needs ...string) *Step {
	ref := GenerationReference(r, t, add)
	g := generationGate(t)
	id := kind + ":" + of
	if suffix, ok := strings.CutPrefix(ref.ID, ReferenceStepID); ok {
		id += suffix
	}
	def := recipe.DefaultGeneration()
	if g.MinTokenAgreement != def.MinTokenAgreement {
		id += fmt.Sprintf("+agree=%g", g.MinTokenAgreement)
	}
	if g.MaxMeanKL != def.MaxMeanKL {
		id += fmt.Sprintf("+kl=%g", g.MaxMeanKL)
	}
	return add(&Step{ID: id, Kind: kind, Needs: append(append([]string{}, needs...), ref.ID),
		Params: &shared.DecodeParams{MaxNewTokens: g.MaxNewTokens, MinTokenAgreement: g.MinTokenAgreement, MaxMeanKL: g.MaxMeanKL}}, t.Name)
}

// generationGate is the target's generation gate, the defaults for a
// recipe built without parsing.
func generationGate(t *recipe.Target) *recipe.GenerationGate {
	if g := t.Quality.Generation; g != nil {
		return g
	}
	return recipe.DefaultGeneration()
}

// EvalOf is how a target's perplexity gate scores.
func EvalOf(g recipe.PerplexityGate) steps.Eval {
	return steps.Eval{Chunk: g.Context, MaxChunks: g.MaxChunks}
}

// EvalData is a quality step's data: the recipe's evaluation text.
func EvalData(r *recipe.Recipe) map[string]string {
	return map[string]string{steps.DataEval: r.Data.Eval}
}

// CalibrationData is a calibrated step's data: the recipe's calibration
// text.
func CalibrationData(r *recipe.Recipe) map[string]string {
	return map[string]string{steps.DataCalibration: r.Data.Calibration}
}

// OptionSuffix spells the options named in keys that a target set (a
// pointer field that is not nil, or a bool that is true) in a step id
// suffix ("+opset=17"), so targets that differ only in options get their
// own steps instead of silently sharing one.
func OptionSuffix(opts any, keys ...string) string {
	set := SetOptions(opts)
	var parts []string
	for _, k := range keys {
		if val, ok := set[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", k, val))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return ""
	}
	return "+" + strings.Join(parts, "+")
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

// Or is *p, or def when the option was not set.
func Or[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// DefaultTargetContext is the context of a target that sets none, for the
// formats that build one into the artifact (Core ML, MLC, TensorRT
// engines): the domain brief's 4K-8K edge range, at its low end.
const DefaultTargetContext = 4096

// TargetContext is the context a target's artifact is built for.
func TargetContext(t *recipe.Target) int {
	if t.Context > 0 {
		return t.Context
	}
	return DefaultTargetContext
}
