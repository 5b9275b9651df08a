package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/edgepipe/edgepipe/pipelines"
)

var allTargetsBench = benchmark{
	name: "all-targets",
	about: func(*env) string {
		return "the every-target recipe rebuilt (--force --keep-going) at -j 2 vs -j 1, one run each; peak RSS of one process and of the process tree; " +
			"ratio = j2 / j1; goal: peak < 20 GiB"
	},
	run: runAllTargets,
}

// allTargetsExit are the exit codes a --keep-going run of the every-target
// recipe may end with on a host that cannot build every target: 1 (a step
// failed, e.g. one that needs an NVIDIA GPU) and 3 (a quality gate failed).
var allTargetsExit = []int{0, 1, 3}

func runAllTargets(ctx context.Context, e *env) (result, error) {
	recipe := e.allTargetsRecipe
	if !filepath.IsAbs(recipe) {
		recipe = filepath.Join(e.root, recipe)
	}
	if _, err := os.Stat(recipe); errors.Is(err, fs.ErrNotExist) {
		return result{skipped: fmt.Sprintf("%s does not exist yet (issue 5 adds the every-target recipe); pass -all-targets-recipe when it has another name", e.allTargetsRecipe)}, nil
	}
	if reason, err := e.toolchainsMissing(ctx, allTargetsToolchains); err != nil || reason != "" {
		return result{skipped: reason}, err
	}
	dir, err := e.workdir("all-targets")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	return measureParallel(ctx, e, recipe, realToolEnv, filepath.Join(dir, "out"))
}

func measureParallel(ctx context.Context, e *env, recipe string, runEnv []string, out string) (result, error) {
	res := result{}
	runAt := func(jobs string) (measurement, int, error) {
		c := command{
			argv:          []string{e.edgepipe, "run", "--json", "--force", "--keep-going", "-j", jobs, "--out", out, recipe},
			dir:           filepath.Dir(recipe),
			env:           runEnv,
			sampleTreeRSS: true,
		}
		e.logf("all-targets: run at -j %s", jobs)
		m, err := run(ctx, c)
		if err != nil {
			return m, 0, err
		}
		if !slices.Contains(allTargetsExit, m.exitCode) {
			return m, 0, fmt.Errorf("edgepipe run -j %s exited %d:\n%s", jobs, m.exitCode, m.errorText())
		}
		counts, err := countEvents(m.stdout)
		if err != nil {
			return m, 0, err
		}
		return m, counts[pipelines.EvPublished], nil
	}
	j1, pub1, err := runAt("1")
	if err != nil {
		return res, err
	}
	j2, pub2, err := runAt("2")
	if err != nil {
		return res, err
	}
	if pub1 != pub2 {
		return res, fmt.Errorf("-j 1 published %d targets but -j 2 published %d: the runs did different work", pub1, pub2)
	}
	peak := max(j1.peakTreeRSS, j2.peakTreeRSS, j1.maxRSS, j2.maxRSS)
	res.add("published", pub2)
	res.add("j1_s", j1.wall)
	res.add("j2_s", j2.wall)
	res.add("exit_j1", j1.exitCode)
	res.add("exit_j2", j2.exitCode)
	res.add("max_process_rss_GiB", float64(max(j1.maxRSS, j2.maxRSS))/(1<<30))
	res.add("peak_tree_rss_j2_GiB", float64(j2.peakTreeRSS)/(1<<30))
	res.add("goal", "peak_rss<20GiB")
	res.add("met", peak < 20<<30)
	res.ratio = j2.wall.Seconds() / j1.wall.Seconds()
	return res, nil
}
