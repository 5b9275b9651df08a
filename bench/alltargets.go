package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/event"
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
	out := e.keepOut
	if out == "" {
		dir, err := e.workdir("all-targets")
		if err != nil {
			return result{}, err
		}
		defer os.RemoveAll(dir)
		out = filepath.Join(dir, "out")
	}
	return measureParallel(ctx, e, recipe, realToolEnv, out)
}

// outcome is what one run did, read from its --json events.
type outcome struct {
	published map[string]string // target -> published folder
	failed    []string          // "step: message" for each step that failed
	gates     []string          // "target: message" for each gate event
}

func readOutcome(stdout []byte) (outcome, error) {
	o := outcome{published: map[string]string{}}
	evs, err := events(stdout)
	if err != nil {
		return o, err
	}
	for _, ev := range evs {
		switch ev.Type {
		case event.Published:
			o.published[ev.Target] = ev.Path
		case event.Failed:
			o.failed = append(o.failed, ev.Step+": "+firstLine(ev.Message))
		case event.Gate:
			o.gates = append(o.gates, ev.Target+": "+firstLine(ev.Message))
		}
	}
	return o, nil
}

func (o outcome) targets() []string {
	return slices.Sorted(maps.Keys(o.published))
}

func measureParallel(ctx context.Context, e *env, recipe string, runEnv []string, out string) (result, error) {
	res := result{}
	runAt := func(jobs string) (measurement, outcome, error) {
		c := command{
			argv:          []string{e.edgepipe, "run", "--json", "--force", "--keep-going", "-j", jobs, "--out", out, recipe},
			dir:           filepath.Dir(recipe),
			env:           runEnv,
			sampleTreeRSS: true,
		}
		e.logf("all-targets: run at -j %s", jobs)
		m, err := run(ctx, c)
		if err != nil {
			return m, outcome{}, err
		}
		if !slices.Contains(allTargetsExit, m.exitCode) {
			return m, outcome{}, fmt.Errorf("edgepipe run -j %s exited %d:\n%s", jobs, m.exitCode, m.errorText())
		}
		o, err := readOutcome(m.stdout)
		if err != nil {
			return m, o, err
		}
		e.logf("all-targets: -j %s took %s, exit %d, published %d: %s", jobs, m.wall.Round(time.Second), m.exitCode, len(o.published), strings.Join(o.targets(), " "))
		for _, g := range o.gates {
			e.logf("all-targets:   gate %s", g)
		}
		for _, f := range o.failed {
			e.logf("all-targets:   failed %s", f)
		}
		return m, o, nil
	}
	j1, pub1, err := runAt("1")
	if err != nil {
		return res, err
	}
	j2, pub2, err := runAt("2")
	if err != nil {
		return res, err
	}
	if !slices.Equal(pub1.targets(), pub2.targets()) {
		return res, fmt.Errorf("-j 1 published %v but -j 2 published %v: the runs did different work", pub1.targets(), pub2.targets())
	}
	// A published folder must verify: every file re-hashed against its
	// manifest (and the provenance subjects).
	verified := 0
	for _, target := range pub2.targets() {
		v, err := run(ctx, command{argv: []string{e.edgepipe, "verify", pub2.published[target]}, env: runEnv})
		if err != nil {
			return res, err
		}
		if v.exitCode != 0 {
			return res, fmt.Errorf("edgepipe verify %s exited %d:\n%s", pub2.published[target], v.exitCode, v.errorText())
		}
		verified++
	}
	peak := max(j1.peakTreeRSS, j2.peakTreeRSS, j1.maxRSS, j2.maxRSS)
	res.add("published", len(pub2.published))
	res.add("verified", verified)
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
