package edge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/recipewrite"
)

// VisionRecipeOptions are what a written image-classification recipe
// needs beyond the pick: the model and, for a model that is not built in,
// its labelled calibration and evaluation sets.
type VisionRecipeOptions struct {
	RecipeOptions
	Calibration, Eval string
}

// visionBuiltins are the built-in classifiers: the sets each is gated on
// and its parameter count.
var visionBuiltins = map[string]struct {
	calibration, eval string
	params            float64
}{
	"builtin:mobilenetv3-small-digits": {"builtin:digits-calibration", "builtin:digits-test", 1528106},
	"builtin:efficientnet-lite0":       {"builtin:skimage-photos-calibration", "builtin:skimage-photos", 4652008},
}

// VisionDataFor returns the calibration and evaluation sets of a built-in
// classifier; ok is false for any other source, whose sets the user names.
func VisionDataFor(source string) (calibration, eval string, ok bool) {
	d, ok := visionBuiltins[source]
	return d.calibration, d.eval, ok
}

// TargetFormat is the format a recipe writes for the pick: the platform
// runtime's own, or the one this build converts for it.
func (p VisionPick) TargetFormat() string {
	if p.Built {
		return p.Format
	}
	return p.Buildable
}

// RenderVisionRecipe writes the vision pick as an image-classification
// recipe in format version 1: the platform's INT8 target beside an
// onnx-fp32 target on this kind of host for the decision table, the
// brief's gate and bench, and the reasons as comments.
func RenderVisionRecipe(p VisionPick, o VisionRecipeOptions) []byte {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	format := p.TargetFormat()
	for _, h := range pickHeader(o.RecipeOptions, fmt.Sprintf("%s for %s (%s), through %s:", format, p.Platform, p.Device, p.Runtime), p.Reasons, p.Warnings) {
		line("# %s", h)
	}
	line("edgepipe: 1")
	line("name: %s", recipewrite.Scalar(o.Name))
	line("description: %s", recipewrite.Scalar(fmt.Sprintf("%s for %s, %s on %s", o.Source, p.Summary, format, p.Device)))
	line("task: image-classification")
	line("")
	line("model:")
	line("  source: %s", recipewrite.Scalar(o.Source))
	line("")
	line("data:")
	line("  calibration: %s", recipewrite.Scalar(o.Calibration))
	line("  eval: %s", recipewrite.Scalar(o.Eval))
	line("")
	line("quality:")
	if slices.Contains(recipe.UnlabelledVisionSets, o.Eval) {
		line("  agreement:                    # the set has no labels: how often the fp32 model's class is kept")
		line("    min: %g", recipe.DefaultMinAgreement)
	} else {
		line("  accuracy:")
		line("    max_drop: %g              # top-1, absolute: one percentage point (platform guide)", recipe.DefaultMaxAccuracyDrop)
	}
	line("")
	line("# 10 warm-up and 50 timed inferences of one image on this host, in the")
	line("# runtime that gated each target (formats no runtime here loads are not timed).")
	line("bench: {warmup: 10, runs: 50, batch: 1}")
	line("")
	line("targets:")
	line("  cpu-fp32:                       # the ONNX export every runtime converts from, timed here")
	line("    device: x86-laptop")
	line("    format: onnx-fp32")
	line("  %s:", p.Platform)
	line("    device: %s", p.Device)
	line("    format: %s", format)
	return []byte(b.String())
}

// VisionModelParams counts a classifier's parameters: a built-in's are
// known, a local folder's are read from its safetensors headers.
func VisionModelParams(model string) (float64, error) {
	if b, ok := visionBuiltins[model]; ok {
		return b.params, nil
	}
	if strings.Contains(model, ":") && !strings.HasPrefix(model, "./") {
		return 0, fmt.Errorf("%s: name the backbone's parameter count with --params (only a built-in or a local folder is counted)", model)
	}
	n, _, err := sumTensors(model, classifierElems)
	if err != nil {
		return 0, fmt.Errorf("count the parameters of %s: %w; name them with --params", model, err)
	}
	return float64(n), nil
}

// classifierElems counts a classifier's learned weights: BatchNorm's
// running statistics and its integer step counter are state, not
// parameters (torchvision counts neither).
func classifierElems(t headerTensor) (int64, error) {
	for _, state := range []string{".num_batches_tracked", ".running_mean", ".running_var"} {
		if strings.HasSuffix(t.name, state) {
			return 0, nil
		}
	}
	return floatElems(t)
}
