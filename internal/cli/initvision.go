package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/steps"
)

// initVision is `init --task vision`: the vision pick written as an
// image-classification recipe. The model is --model, else the built-in
// backbone the brief's rule picks for --params; a model that is not built
// in brings its labelled calibration and evaluation sets.
func initVision(env *Env, pf *pickFlags, out, name, calibration, eval string, force bool) error {
	if pf.format != "" || pf.minTokS > 0 || pf.maxMemGB > 0 || pf.context != edge.DefaultContext {
		return usageErr("--task vision takes --platform, --model or --params, --calibration and --eval (the LLM flags --format, --min-tok-s, --max-memory and --context do not apply)")
	}
	if pf.platform == "" || (pf.model == "" && pf.params == "") {
		return usageErr("name a --platform (%s) and the model (--model builtin:mobilenetv3-small-digits or a folder) or the backbone's --params, e.g. --params 2.5M",
			strings.Join(edge.Platforms(), ", "))
	}
	flagCal, flagEval := calibration, eval
	var params float64
	if pf.params != "" {
		n, err := edge.ParseParams(pf.params)
		if err != nil {
			return usageErr("%v", err)
		}
		params = n
	}
	model := pf.model
	source := ""
	if model != "" {
		s, err := edge.SourceFromRecipe(model, out)
		if err != nil {
			return err
		}
		source = s
		if params == 0 {
			n, err := edge.VisionModelParams(model, model)
			if err != nil {
				return usageErr("%v", err)
			}
			params = n
		}
	}
	vp, err := edge.PickVision(edge.VisionRequest{Platform: pf.platform, Params: params})
	var unknown *edge.UnknownPlatformError
	if errors.As(err, &unknown) {
		return usageErr("%v", err)
	}
	if err != nil {
		return err
	}
	if source == "" {
		source = vp.Builtin
	} else if _, _, builtin := edge.VisionDataFor(source); !builtin {
		// The user's own model: the brief's backbone advice (the first
		// reason) is about choosing one, which they have done.
		vp.Backbone, vp.Reasons = "your model", vp.Reasons[1:]
	}
	if cal, ev, ok := edge.VisionDataFor(source); ok {
		if calibration == "" {
			calibration = cal
		}
		if eval == "" {
			eval = ev
		}
	}
	if calibration == "" || eval == "" {
		return usageErr("%s is not a built-in model: name its labelled images with --calibration SET and --eval SET (an .npz of images and labels, as data: takes them)", model)
	}
	// Paths given here are the shell's; the recipe's are its folder's.
	for _, p := range []*string{&calibration, &eval} {
		if !strings.HasPrefix(*p, "builtin:") {
			r, err := edge.SourceFromRecipe(*p, out)
			if err != nil {
				return err
			}
			*p = r
		}
	}
	recipeName := name
	if recipeName == "" {
		recipeName = edge.RecipeName(filepath.Base(out))
	}
	cmd := fmt.Sprintf("edgepipe init --task vision --platform %s", shellWord(pf.platform))
	if pf.model != "" {
		cmd += " --model " + shellWord(pf.model)
	}
	if pf.params != "" {
		cmd += " --params " + shellWord(pf.params)
	}
	if flagCal != "" {
		cmd += " --calibration " + shellWord(flagCal)
	}
	if flagEval != "" {
		cmd += " --eval " + shellWord(flagEval)
	}
	data := edge.RenderVisionRecipe(vp, edge.VisionRecipeOptions{
		RecipeOptions: edge.RecipeOptions{Name: recipeName, Source: source, Command: cmd, SchemaLine: edge.SchemaLine(out)},
		Calibration:   calibration, Eval: eval})
	if _, err := recipe.LoadBytes(out, data, plan.Catalog{}, append(steps.Names(), "publish")); err != nil {
		return fmt.Errorf("init wrote a recipe that does not validate (a bug in edgepipe): %s", diagText(err))
	}
	if err := writeNew(out, data, force); err != nil {
		return err
	}
	format := vp.Format
	if !vp.Built {
		format = vp.Buildable
	}
	fmt.Fprintf(env.Stdout, "wrote %s: target %s, %s on %s (%s, %s parameters), beside cpu-fp32\n", out, vp.Platform, format, vp.Device,
		vp.Backbone, strconv.FormatFloat(params, 'f', 0, 64))
	for _, w := range vp.Warnings {
		fmt.Fprintf(env.Stdout, "warning: %s\n", w)
	}
	fmt.Fprintf(env.Stdout, "next: edgepipe plan %s\n", out)
	return nil
}
