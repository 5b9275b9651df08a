package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/benchstat"
	"github.com/edgepipe/edgepipe/internal/event"
)

var schedulerBench = benchmark{
	name: "scheduler",
	about: func(e *env) string {
		return fmt.Sprintf("%d no-op user steps (argv [true], each needing two earlier ones) at -j 2; each spawns a process, so do the peers: "+
			"go-task with the same graph (--concurrency 2) and a shell loop; dag_s = in-process scheduler alone; goal < 2 s", e.schedSteps)
	},
	run: runScheduler,
}

// schedGraph returns, for each step i, the earlier steps it needs: two
// distinct ones among the 20 before it, so the graph is both deep and wide
// enough for two steps to run at once. It is deterministic, so every run
// schedules the same graph.
func schedGraph(n int) [][]int {
	r := rand.New(rand.NewPCG(1, 2))
	deps := make([][]int, n)
	for i := 1; i < n; i++ {
		lo := max(0, i-20)
		a := lo + r.IntN(i-lo)
		deps[i] = []int{a}
		if i-lo > 1 {
			b := lo + r.IntN(i-lo-1)
			if b >= a {
				b++
			}
			deps[i] = append(deps[i], b)
		}
	}
	return deps
}

func schedRecipeSteps(deps [][]int) string {
	var b strings.Builder
	b.WriteString("steps:\n")
	for i, d := range deps {
		fmt.Fprintf(&b, "  s%d:\n    uses: run\n", i)
		if len(d) > 0 {
			b.WriteString("    needs: [")
			for k, j := range d {
				if k > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "s%d", j)
			}
			b.WriteString("]\n")
		}
		b.WriteString("    with: {argv: [\"true\"]}\n")
	}
	return b.String()
}

// schedTaskfile is the same graph for go-task. true is named by its path:
// go-task's shell interpreter has a builtin true, which would spawn nothing.
func schedTaskfile(deps [][]int, truePath string) string {
	var b strings.Builder
	b.WriteString("version: '3'\nrun: once\ntasks:\n  all:\n    deps: [")
	for i := range deps {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "s%d", i)
	}
	b.WriteString("]\n")
	for i, d := range deps {
		fmt.Fprintf(&b, "  s%d:\n", i)
		if len(d) > 0 {
			b.WriteString("    deps: [")
			for k, j := range d {
				if k > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "s%d", j)
			}
			b.WriteString("]\n")
		}
		fmt.Fprintf(&b, "    cmds: [%s]\n", truePath)
	}
	return b.String()
}

func runScheduler(ctx context.Context, e *env) (result, error) {
	res := result{}
	dir, err := e.workdir("scheduler")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	cache := filepath.Join(dir, "cache")
	truePath, err := exec.LookPath("true")
	if err != nil {
		return res, fmt.Errorf("no true on PATH: %w", err)
	}
	deps := schedGraph(e.schedSteps)
	if err := writeTinyProject(dir, "sched", schedRecipeSteps(deps)); err != nil {
		return res, err
	}
	taskfile := filepath.Join(dir, "Taskfile.yml")
	if err := os.WriteFile(taskfile, []byte(schedTaskfile(deps, truePath)), 0o644); err != nil {
		return res, err
	}
	task, err := e.goTask(ctx)
	if err != nil {
		return res, err
	}

	edgepipe := command{argv: []string{e.edgepipe, "run", "--json", "-j", "2", "recipe.yaml"}, dir: dir, env: e.standinEnv(cache)}
	gotask := command{argv: []string{task, "--taskfile", taskfile, "--concurrency", "2", "all"}, dir: dir}
	shell := command{argv: []string{"sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do %s; i=$((i+1)); done", e.schedSteps, truePath)}, dir: dir}

	// Setup: the first run also builds the recipe's one target; later runs
	// find it cached, and only the user steps (never cached) run.
	e.logf("scheduler: setup run")
	if _, err := mustSucceed(ctx, edgepipe); err != nil {
		return res, err
	}
	e.logf("scheduler: timing %d runs of each side", e.slowReps)
	var epT, taskT, shT []time.Duration
	var epCPU []time.Duration
	for range e.slowReps {
		m, err := mustSucceed(ctx, edgepipe)
		if err != nil {
			return res, err
		}
		counts, err := countEvents(m.stdout)
		if err != nil {
			return res, err
		}
		if n := counts[event.Finished]; n != e.schedSteps {
			return res, fmt.Errorf("edgepipe reported %d finished steps, want the %d user steps", n, e.schedSteps)
		}
		epT, epCPU = append(epT, m.wall), append(epCPU, m.cpu)
		if m, err = mustSucceed(ctx, gotask); err != nil {
			return res, err
		}
		taskT = append(taskT, m.wall)
		if m, err = mustSucceed(ctx, shell); err != nil {
			return res, err
		}
		shT = append(shT, m.wall)
	}

	e.logf("scheduler: go test -bench BenchmarkNoop1000 ./internal/dag")
	dagNs, err := dagBench(ctx, e.root)
	if err != nil {
		return res, err
	}

	ep, tk, sh := benchstat.Median(epT), benchstat.Median(taskT), benchstat.Median(shT)
	res.add("steps", e.schedSteps)
	res.add("edgepipe_s", ep)
	res.add("edgepipe_cpu_s", benchstat.Median(epCPU))
	res.add("task_s", tk)
	res.add("shell_loop_s", sh)
	res.add("dag_s", dagNs/1e9)
	res.add("ratio_vs_shell", ep.Seconds()/sh.Seconds())
	res.add("goal", "edgepipe_s<2")
	res.add("met", ep < 2*time.Second)
	res.ratio = ep.Seconds() / tk.Seconds()
	return res, nil
}

var nsPerOp = regexp.MustCompile(`(?m)^BenchmarkNoop1000\S*\s+\d+\s+([0-9.]+) ns/op`)

// dagBench runs the dag package's in-process benchmark and returns its
// ns/op: the scheduler's own cost for 1,000 no-op nodes, no processes.
func dagBench(ctx context.Context, root string) (float64, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkNoop1000$", "-benchtime", "20x", "-count", "3", "./internal/dag")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("go test -bench BenchmarkNoop1000 ./internal/dag: %w\n%s", err, out)
	}
	return parseNsPerOp(out)
}

// parseNsPerOp returns the median ns/op of BenchmarkNoop1000 lines.
func parseNsPerOp(out []byte) (float64, error) {
	var ns []int64
	for _, m := range nsPerOp.FindAllSubmatch(out, -1) {
		f, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			return 0, err
		}
		ns = append(ns, int64(f))
	}
	if len(ns) == 0 {
		return 0, fmt.Errorf("no BenchmarkNoop1000 result in go test output:\n%s", out)
	}
	return float64(benchstat.Median(ns)), nil
}
