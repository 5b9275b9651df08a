package edge

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// VisionRecipeOptions are what a written image-classification recipe
// needs beyond the pick: the model and, for a model that is not built in,
// its labelled calibration and evaluation sets.
type VisionRecipeOptions struct {
	RecipeOptions
	Calibration, Eval string
}

// visionBuiltinData are the sets each built-in classifier is gated on,
// and whether they carry labels (else the gate is agreement).
var visionBuiltinData = map[string]struct {
	calibration, eval string
	labelled          bool
}{
	"builtin:mobilenetv3-small-digits": {"builtin:digits-calibration", "builtin:digits-test", true},
	"builtin:efficientnet-lite0":       {"builtin:skimage-photos-calibration", "builtin:skimage-photos", false},
}

// VisionDataFor returns the calibration and evaluation sets of a built-in
// classifier; ok is false for any other source, whose sets the user names.
func VisionDataFor(source string) (calibration, eval string, ok bool) {
	d, ok := visionBuiltinData[source]
	return d.calibration, d.eval, ok
}

// RenderVisionRecipe writes the vision pick as an image-classification
// recipe in format version 1: the platform's INT8 target (or the one this
// build converts for it) beside an onnx-fp32 target on this kind of host
// for the decision table, the brief's gate and bench, and the reasons as comments.
func RenderVisionRecipe(p VisionPick, o VisionRecipeOptions) []byte {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	schema := o.SchemaLine
	if schema == "" {
		schema = SchemaComment
	}
	line("%s", schema)
	if o.Command != "" {
		line("# Written by `%s`.", o.Command)
	}
	format := p.Format
	if !p.Built {
		format = p.Buildable
	}
	line("# %s for %s (%s), through %s:", format, p.Platform, p.Device, p.Runtime)
	for _, r := range p.Reasons {
		for _, l := range wrap("  - ", r) {
			line("# %s", l)
		}
	}
	if len(p.Warnings) > 0 {
		line("# Warnings when it was written:")
		for _, w := range p.Warnings {
			for _, l := range wrap("  - ", w) {
				line("# %s", l)
			}
		}
	}
	line("edgepipe: 1")
	line("name: %s", o.Name)
	line("description: %s", yamlString(fmt.Sprintf("%s for %s, %s on %s", o.Source, p.Summary, format, p.Device)))
	line("task: image-classification")
	line("")
	line("model:")
	line("  source: %s", yamlString(o.Source))
	line("")
	line("data:")
	line("  calibration: %s", yamlString(o.Calibration))
	line("  eval: %s", yamlString(o.Eval))
	line("")
	line("quality:")
	if d, ok := visionBuiltinData[o.Source]; ok && !d.labelled {
		line("  agreement:                    # the set has no labels: how often the fp32 model's class is kept")
		line("    min: 0.99")
	} else {
		line("  accuracy:")
		line("    max_drop: 0.01              # top-1, absolute: one percentage point (domain brief)")
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

// yamlString quotes s when YAML would read it as something else (a
// builtin:NAME or a path stays plain).
func yamlString(s string) string {
	if s == "" || strings.Contains(s, ": ") || strings.Contains(s, " #") || strings.HasSuffix(s, ":") ||
		strings.ContainsAny(s[:1], "{}[],&*!|>'\"%@`#-?") || strings.TrimSpace(s) != s {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// visionBuiltinParams are the built-in classifiers' parameter counts.
var visionBuiltinParams = map[string]float64{
	"builtin:mobilenetv3-small-digits": 1528106,
	"builtin:efficientnet-lite0":       4652008,
}

// VisionModelParams counts a classifier's parameters: a built-in's are
// known, a local folder's are read from its safetensors headers.
func VisionModelParams(source, dir string) (float64, error) {
	if n, ok := visionBuiltinParams[source]; ok {
		return n, nil
	}
	if strings.Contains(source, ":") && !strings.HasPrefix(source, "./") {
		return 0, fmt.Errorf("%s: name the backbone's parameter count with --params (only a built-in or a local folder is counted)", source)
	}
	n, err := classifierParams(dir)
	if err != nil {
		return 0, fmt.Errorf("count the parameters of %s: %w; name them with --params", source, err)
	}
	if n == 0 {
		return 0, fmt.Errorf("%s holds no safetensors weights to count; name the parameter count with --params", source)
	}
	return float64(n), nil
}

// classifierParams counts a classifier checkpoint's learned weights from
// its safetensors headers: BatchNorm's running statistics and its integer
// step counter are state, not parameters (torchvision counts neither).
func classifierParams(dir string) (int64, error) {
	names, err := safetensorsFiles(dir)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, name := range names {
		tensors, err := readHeader(filepath.Join(dir, name))
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		for _, t := range tensors {
			switch {
			case strings.HasSuffix(t.name, ".num_batches_tracked"), strings.HasSuffix(t.name, ".running_mean"), strings.HasSuffix(t.name, ".running_var"):
			case !slices.Contains(floatDtypes, t.dtype):
				return 0, fmt.Errorf("%s: tensor %s is %s: a quantized checkpoint, whose header does not count parameters", name, t.name, t.dtype)
			default:
				total += t.elems
			}
		}
	}
	return total, nil
}
