package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"

	"github.com/edgepipe/edgepipe/bench/shellpeer"
	"github.com/edgepipe/edgepipe/bench/waitpolicy"
	"github.com/edgepipe/edgepipe/internal/benchstat"
)

var waitPolicyBench = benchmark{
	name: "wait-policy",
	about: func(*env) string {
		return "recipes/demo.yaml's llama-perplexity --kl-divergence on its Q8_0, one thread per core, with OpenMP's default wait policy vs OMP_WAIT_POLICY=PASSIVE " +
			"in alternating pairs (-slow-reps); ratio = default / passive (medians), goal < 1: why the llama.cpp steps keep their own policy"
	},
	run: func(ctx context.Context, e *env) (result, error) {
		if reason, err := e.toolchainsMissing(ctx, demoToolchains); err != nil || reason != "" {
			return result{skipped: reason}, err
		}
		dir, err := e.workdir("wait-policy")
		if err != nil {
			return result{}, err
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "out")
		if _, err := mustSucceed(ctx, command{argv: []string{e.edgepipe, "run", "--out", out, filepath.Join(e.root, "recipes", "demo.yaml")}, env: realToolEnv}); err != nil {
			return result{}, err
		}
		steps, err := shellpeer.PublishedSteps(out)
		if err != nil {
			return result{}, err
		}
		argv, err := waitpolicy.Command(steps, "perplexity:q8_0", runtime.NumCPU())
		if err != nil {
			return result{}, err
		}
		t, err := waitpolicy.Measure(ctx, argv, e.slowReps)
		if err != nil {
			return result{}, err
		}
		res := result{}
		res.add("default_runs_s", joinSeconds(t.Default))
		res.add("passive_runs_s", joinSeconds(t.Passive))
		ratio := benchstat.Median(t.Default).Seconds() / benchstat.Median(t.Passive).Seconds()
		res.add("goal", "ratio<1")
		res.add("met", ratio < 1)
		res.ratio = ratio
		return res, nil
	},
}
