package main

import (
	"context"
	"strings"

	"github.com/edgepipe/edgepipe/bench/memplan"
)

// memoryPlanBench: each step kind's memory weight predicted from the model
// vs its recorded peak RSS, one line per built-in model (bench/memplan).
var memoryPlanBench = benchmark{
	name:  "memory-plan",
	about: func(e *env) string { return memplan.About(e.memPlanRecipes) },
	runAll: func(ctx context.Context, e *env) ([]result, error) {
		if reason, err := e.toolchainsMissing(ctx, allTargetsToolchains); err != nil || reason != "" {
			return []result{{skipped: reason}}, err
		}
		return memoryPlan(ctx, e, memplan.Config{Env: realToolEnv})
	},
}

// memoryPlan runs the comparison with c's tools and cache (the stand-in
// test passes its own) and renders its lines as the other benchmarks'.
func memoryPlan(ctx context.Context, e *env, c memplan.Config) ([]result, error) {
	c.Edgepipe, c.Root, c.Scratch, c.Log = e.edgepipe, e.root, e.scratch, e.log
	c.Recipes, c.Fit = strings.Split(e.memPlanRecipes, ","), e.memPlanFit
	lines, err := memplan.Run(ctx, c)
	var out []result
	for _, l := range lines {
		r := result{ratio: l.Ratio}
		for _, f := range l.Fields {
			r.add(f.Key, f.Value)
		}
		out = append(out, r)
	}
	return out, err
}
