package llmcompressor

import (
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// llmcWith are the target options llmc-quantize takes from `with:`, and
// the short tag each adds to the step id (gptq-w4a16+g64+n16).
var llmcWith = []struct{ key, tag string }{
	{"group_size", "g"}, {"num_calibration_samples", "n"}, {"max_seq_length", "s"}, {"n_grid", "grid"},
	{"symmetric", "sym="}, {"observer", "obs="}, {"actorder", "order="}, {"rounding", "round="}, {"v_down_bits", "vd"},
}

// expandLLMCompressor: source -> llmc-quantize (GPTQ or AWQ W4A16 on the
// CPU, calibrated on the recipe's calibration text) -> llmc-perplexity,
// gated against the transformers baseline of the unconverted model on the
// same tokens and chunks, and llmc-decode, the decode check against the
// shared generate:reference.
func expandLLMCompressor(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
	ppl := t.Quality.Perplexity
	baseline := plan.HFBaseline(r, t, add)

	// The step id spells every option the target sets, so targets that
	// differ only in options do not share (and silently merge) one step.
	scheme := f.Family
	var o *Options
	params := &QuantizeParams{Scheme: scheme}
	switch opts := t.Options.(type) {
	case *AWQOptions:
		o = &opts.Options
		params.NGrid = plan.Or(opts.NGrid, DefaultAWQGrid)
		params.Rounding = plan.Or(opts.Rounding, DefaultAWQRounding)
		if params.Rounding == "gptq" {
			params.ActOrder = DefaultActOrder
		}
	case *GPTQOptions:
		o = &opts.Options
		params.ActOrder = plan.Or(opts.ActOrder, DefaultActOrder)
	}
	params.Symmetric = plan.Or(o.Symmetric, false)
	params.VDownBits = plan.Or(o.VDownBits, DefaultVDownBits)
	params.Observer = plan.Or(o.Observer, DefaultObserver(scheme, params.Rounding))
	params.GroupSize = plan.Or(o.GroupSize, 0)
	params.Samples = plan.Or(o.NumCalibrationSamples, DefaultCalibrationSamples)
	params.SeqLen = plan.Or(o.MaxSeqLength, DefaultCalibrationSeqLen)
	var opts []string
	set := plan.SetOptions(t.Options)
	for _, w := range llmcWith {
		if v, ok := set[w.key]; ok {
			opts = append(opts, fmt.Sprintf("%s%v", w.tag, v))
		}
	}
	suffix := f.Name
	if len(opts) > 0 {
		suffix += "+" + strings.Join(opts, "+")
	}
	model := add(&plan.Step{ID: "llmc-quantize:" + suffix, Kind: "llmc-quantize", Needs: []string{plan.SourceStepID},
		Params: params, Data: plan.CalibrationData(r)}, t.Name)

	pid := "llmc-perplexity:" + suffix
	if baseline.ID != plan.HFBaselineStepID {
		pid += baseline.ID[len(plan.HFBaselineStepID):]
	}
	ev := plan.EvalOf(ppl)
	check := add(&plan.Step{ID: pid, Kind: "llmc-perplexity", Needs: []string{model.ID, baseline.ID},
		Params: &ev, Data: plan.EvalData(r)}, t.Name)
	decode := plan.GenerationCheck(r, t, add, "llmc-decode", suffix, model.ID)
	return model, []string{check.ID, decode.ID}
}
