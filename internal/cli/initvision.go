package cli

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/steps"
)

// initVision is `init --task vision` (edge.VisionInit writes the recipe).
func initVision(env *Env, pf *pickFlags, out, name, calibration, eval string, force bool) error {
	if pf.format != "" || pf.minTokS > 0 || pf.maxMemGB > 0 || pf.context != edge.DefaultContext {
		return usageErr("--task vision takes --platform, --model or --params, --calibration and --eval (the LLM flags --format, --min-tok-s, --max-memory and --context do not apply)")
	}
	cmd := "edgepipe init --task vision --platform " + shellWord(pf.platform)
	for _, f := range []struct{ flag, v string }{{"--model", pf.model}, {"--params", pf.params}, {"--calibration", calibration}, {"--eval", eval}} {
		if f.v != "" {
			cmd += " " + f.flag + " " + shellWord(f.v)
		}
	}
	data, vp, params, err := edge.VisionInit(edge.VisionInitRequest{Platform: pf.platform, Model: pf.model, Params: pf.params,
		Calibration: calibration, Eval: eval, Out: out, Name: name, Command: cmd})
	var usage *edge.UsageError
	if errors.As(err, &usage) {
		return usageErr("%s", usage.Msg)
	}
	if err != nil {
		return err
	}
	if _, err := recipe.LoadBytes(out, data, plan.Catalog{}, append(steps.Names(), "publish")); err != nil {
		return fmt.Errorf("init wrote a recipe that does not validate (a bug in edgepipe): %s", diagText(err))
	}
	if err := writeNew(out, data, force); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %s: target %s, %s on %s (%s, %s parameters), beside cpu-fp32\n", out, vp.Platform, vp.TargetFormat(), vp.Device,
		vp.Backbone, strconv.FormatFloat(params, 'f', 0, 64))
	for _, w := range vp.Warnings {
		fmt.Fprintf(env.Stdout, "warning: %s\n", w)
	}
	fmt.Fprintf(env.Stdout, "next: edgepipe plan %s\n", out)
	return nil
}
