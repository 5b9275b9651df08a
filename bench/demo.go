package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/bench/shellpeer"
	"github.com/edgepipe/edgepipe/internal/benchstat"
	"github.com/edgepipe/edgepipe/internal/event"
)

var demoOverheadBench = benchmark{
	name: "demo-overhead",
	about: func(*env) string {
		return "recipes/demo.yaml with every step rerun (--force) vs a shell script of the same tool commands (from the manifests' argv); " +
			"ratio = edgepipe -j 1 / script, goal <= 1.02 (issue 18), and -j 2 should beat the script; ratio_own_j1 adds only edgepipe's own measured share to the script's time"
	},
	run: runDemoOverhead,
}

var demoRerunBench = benchmark{
	name: "demo-rerun",
	about: func(*env) string {
		return "recipes/demo.yaml rerun with everything cached vs the same recipe run cold (-j 2) in this run; ratio = rerun / cold; goal < 0.2 s"
	},
	run: runDemoRerun,
}

// demoColdRun is what demo-overhead leaves for demo-rerun: the published
// folder and the cold -j 2 time to compare a rerun with.
type demoColdRun struct {
	out  string
	cold time.Duration
}

// demoToolchains are what recipes/demo.yaml runs; allTargetsToolchains
// are every toolchain that installs on a host without an NVIDIA GPU (the
// every-target run uses --keep-going for the rest).
var (
	demoToolchains       = []string{"uv", "llama", "llamacpp"}
	allTargetsToolchains = []string{"uv", "llama", "llamacpp", "onnx", "llmcompressor", "coreml"}
)

// toolchainsMissing says why the real-tool benchmarks cannot run, or ""
// when `edgepipe doctor` finds every tool of the named toolchains. Tools
// that cannot be installed on this host (mlc_llm, the NVIDIA tools) make
// doctor exit non-zero, so its exit code alone would skip everything.
func (e *env) toolchainsMissing(ctx context.Context, toolchains []string) (string, error) {
	m, err := run(ctx, command{argv: []string{e.edgepipe, "doctor", "--json"}, dir: e.root})
	if err != nil {
		return "", err
	}
	var tools []struct {
		Name      string
		Toolchain string
		Found     bool
	}
	if err := json.Unmarshal(m.stdout, &tools); err != nil {
		return "", fmt.Errorf("read `edgepipe doctor --json` (exit %d): %w", m.exitCode, err)
	}
	var missing []string
	for _, t := range tools {
		if slices.Contains(toolchains, t.Toolchain) && !t.Found {
			missing = append(missing, t.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("needs the real toolchains %s, but `edgepipe doctor` finds no %s; install them with `go tool task toolchains`",
			strings.Join(toolchains, ", "), strings.Join(missing, ", ")), nil
	}
	return "", nil
}

// realToolEnv makes edgepipe use the installed toolchains (from the
// caller's EDGEPIPE_CACHE or the default cache), never the stand-ins.
var realToolEnv = []string{"EDGEPIPE_TOOL_PATH="}

func runDemoOverhead(ctx context.Context, e *env) (result, error) {
	if reason, err := e.toolchainsMissing(ctx, demoToolchains); err != nil || reason != "" {
		return result{skipped: reason}, err
	}
	dir, err := e.workdir("demo")
	if err != nil {
		return result{}, err
	}
	recipe := filepath.Join(e.root, "recipes", "demo.yaml")
	res, cold, err := measureOverhead(ctx, e, recipe, realToolEnv, dir)
	if err != nil {
		return res, err
	}
	e.demoCold = &cold
	return res, nil
}

// measureOverhead times cold runs of recipe at -j 1 and -j 2 against a
// shell script of the same tool commands. dir receives the published
// folders and the script's outputs.
func measureOverhead(ctx context.Context, e *env, recipe string, runEnv []string, dir string) (result, demoColdRun, error) {
	res := result{}
	out := filepath.Join(dir, "out")
	edgepipe := func(extra ...string) command {
		argv := append([]string{e.edgepipe, "run", "--json", "--out", out}, extra...)
		return command{argv: append(argv, recipe), dir: filepath.Dir(recipe), env: runEnv}
	}
	// The script replays the commands of a -j 1 run: each step's thread
	// grant is in its argv (llama.cpp's -t), and a script made from a -j 2
	// run carried that run's grants, not the -j 1 run's it is compared
	// with. Forced: a cached step's manifest entry keeps the argv of
	// whichever run made it, at whatever grant that was.
	e.logf("demo-overhead: setup run at -j 1 (gives the tool commands)")
	if _, err := mustSucceed(ctx, edgepipe("--force", "-j", "1")); err != nil {
		return res, demoColdRun{}, err
	}
	steps, err := shellpeer.PublishedSteps(out)
	if err != nil {
		return res, demoColdRun{}, err
	}
	script, err := shellpeer.Script(steps, filepath.Join(dir, "peer"), e.peerPassive)
	if err != nil {
		return res, demoColdRun{}, err
	}
	scriptPath := filepath.Join(dir, "peer.sh")
	if err := os.WriteFile(scriptPath, []byte(script), 0o755); err != nil {
		return res, demoColdRun{}, err
	}
	shell := command{argv: []string{"sh", scriptPath}, dir: filepath.Dir(recipe)}

	e.logf("demo-overhead: timing %d cold runs of each side", e.slowReps)
	var j1, j2, sh []time.Duration
	phases := map[string][]float64{}
	gaps := map[string][]float64{} // per step: edgepipe's step time minus the script's commands
	for range e.slowReps {
		m, err := mustSucceed(ctx, edgepipe("--force", "-j", "1"))
		if err != nil {
			return res, demoColdRun{}, err
		}
		j1 = append(j1, m.wall)
		evs, err := events(m.stdout)
		if err != nil {
			return res, demoColdRun{}, err
		}
		ph, err := overheadPhases(evs)
		if err != nil {
			return res, demoColdRun{}, err
		}
		ph["own_s"] = m.wall.Seconds() - ph["tools_s"] // everything that is not a tool running
		for k, v := range ph {
			phases[k] = append(phases[k], v)
		}
		stepTimes := finishedSteps(evs)
		if m, err = mustSucceed(ctx, shell); err != nil {
			return res, demoColdRun{}, fmt.Errorf("the shell peer failed: %w", err)
		}
		sh = append(sh, m.wall)
		peerTimes, err := shellpeer.ReadTimes(filepath.Join(dir, "peer", shellpeer.TimesFile))
		if err != nil {
			return res, demoColdRun{}, err
		}
		for id, t := range peerTimes {
			if et, ok := stepTimes[id]; ok {
				gaps[id] = append(gaps[id], et-t)
			}
		}
		if m, err = mustSucceed(ctx, edgepipe("--force", "-j", "2")); err != nil {
			return res, demoColdRun{}, err
		}
		j2 = append(j2, m.wall)
	}
	t1, t2, ts := benchstat.Median(j1), benchstat.Median(j2), benchstat.Median(sh)
	commands := 0
	for _, s := range steps {
		commands += len(s.Argv)
	}
	res.add("tool_commands", commands)
	res.add("edgepipe_j1_s", t1)
	res.add("edgepipe_j2_s", t2)
	res.add("shell_s", ts)
	res.add("ratio_j2", t2.Seconds()/ts.Seconds())
	// Each pair ran back to back, so their ratios show how far the tools'
	// own spread moves the median ratio.
	res.add("j1_runs_s", joinSeconds(j1))
	res.add("shell_runs_s", joinSeconds(sh))
	if e.peerPassive {
		res.add("peer_env", "OMP_WAIT_POLICY=PASSIVE")
	}
	// Where the -j 1 run's extra time is: each step's median gap (its
	// output hashing included), largest first.
	res.add("j1_step_gaps_s", formatGaps(gaps))
	// edgepipe's own share at -j 1, by part (the overhead event's sums).
	for _, k := range slices.Sorted(maps.Keys(phases)) {
		res.add("j1_"+k, benchstat.Median(phases[k]))
	}
	// The direct ratio carries the tools' own run-to-run spread (seconds
	// either way on a shared machine); this one adds only edgepipe's
	// measured share to the script's time.
	res.add("ratio_own_j1", (ts.Seconds()+benchstat.Median(phases["own_s"]))/ts.Seconds())
	res.add("goal", "ratio<=1.02,ratio_j2<1")
	res.add("met", t1.Seconds()/ts.Seconds() <= 1.02 && t2 < ts)
	res.ratio = t1.Seconds() / ts.Seconds()
	return res, demoColdRun{out: out, cold: t2}, nil
}

func runDemoRerun(ctx context.Context, e *env) (result, error) {
	if reason, err := e.toolchainsMissing(ctx, demoToolchains); err != nil || reason != "" {
		return result{skipped: reason}, err
	}
	recipe := filepath.Join(e.root, "recipes", "demo.yaml")
	return measureRerun(ctx, e, recipe, realToolEnv)
}

// measureRerun times fully cached reruns of recipe against a cold run of
// it: demo-overhead's when it ran before, else one made here.
func measureRerun(ctx context.Context, e *env, recipe string, runEnv []string) (result, error) {
	res := result{}
	cold := e.demoCold
	if cold == nil {
		dir, err := e.workdir("demo-rerun")
		if err != nil {
			return res, err
		}
		out := filepath.Join(dir, "out")
		e.logf("demo-rerun: one cold run (the peer)")
		c := command{argv: []string{e.edgepipe, "run", "--json", "--force", "-j", "2", "--out", out, recipe}, dir: filepath.Dir(recipe), env: runEnv}
		m, err := mustSucceed(ctx, c)
		if err != nil {
			return res, err
		}
		cold = &demoColdRun{out: out, cold: m.wall}
	}
	rerun := command{argv: []string{e.edgepipe, "run", "--json", "--out", cold.out, recipe}, dir: filepath.Dir(recipe), env: runEnv}
	settle()
	if _, err := cachedRun(ctx, rerun); err != nil { // warm-up
		return res, err
	}
	e.logf("demo-rerun: timing %d reruns", e.reps)
	var ts []time.Duration
	var read int64
	for range e.reps {
		m, err := cachedRun(ctx, rerun)
		if err != nil {
			return res, err
		}
		ts = append(ts, m.wall)
		read = max(read, m.rchar)
	}
	t := benchstat.Median(ts)
	res.add("rerun_s", t)
	res.add("cold_j2_s", cold.cold)
	res.add("rerun_read_bytes", read)
	res.add("goal", "rerun_s<0.2")
	res.add("met", t < 200*time.Millisecond)
	res.ratio = t.Seconds() / cold.cold.Seconds()
	return res, nil
}

// overheadPhases reads the phases of the overhead event that ends a
// `run --json`'s events.
func overheadPhases(evs []event.Event) (map[string]float64, error) {
	for _, ev := range slices.Backward(evs) {
		if ev.Type == event.Overhead {
			out := map[string]float64{}
			maps.Copy(out, ev.Phases)
			return out, nil
		}
	}
	return nil, fmt.Errorf("edgepipe run --json printed no %s event", event.Overhead)
}

// joinSeconds writes durations as "168/171/160" (seconds, in run order).
func joinSeconds(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = strconv.FormatFloat(d.Seconds(), 'f', 1, 64)
	}
	return strings.Join(parts, "/")
}

// finishedSteps are the seconds of each step a `run --json` ran.
func finishedSteps(evs []event.Event) map[string]float64 {
	out := map[string]float64{}
	for _, ev := range evs {
		if ev.Type == event.Finished {
			out[ev.Step] = ev.Seconds
		}
	}
	return out
}

// formatGaps writes each step's median gap as "step:+1.23", the largest
// gap first.
func formatGaps(gaps map[string][]float64) string {
	type gap struct {
		step string
		s    float64
	}
	var all []gap
	for step, g := range gaps {
		all = append(all, gap{step, benchstat.Median(g)})
	}
	slices.SortFunc(all, func(a, b gap) int { return cmp.Compare(b.s, a.s) })
	parts := make([]string, len(all))
	for i, g := range all {
		parts[i] = fmt.Sprintf("%s:%+.2f", g.step, g.s)
	}
	return strings.Join(parts, ",")
}
