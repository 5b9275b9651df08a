package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgepipe/edgepipe/internal/benchstat"
)

var elasticBench = benchmark{
	name: "elastic",
	about: func(e *env) string {
		return "a DAG of user steps that really burn CPU with the threads they are granted (EDGEPIPE_THREADS): one long " +
			"single-threaded step beside chains of 1-thread and 1..2-thread steps whose CPU sums to less than the long one, at -j 2; " +
			"ratio = wall / critical path (the long step's burn run alone, same run), with the durations the previous run recorded; " +
			"first_run_ratio without them; rigid_ratio is the same DAG with every step " +
			"weighing its maximum (the scheduling before elastic grants); goal ratio <= 1.15"
	},
	run: runElastic,
}

// burnArg makes the bench binary a CPU burner: `bench -burn UNITS` burns
// UNITS work units split over EDGEPIPE_THREADS threads, so a step granted
// two cores finishes in about half the time.
const burnArg = "-burn"

// burnUnit is one work unit: this many sha256 blocks of a 64 KiB buffer.
const burnUnit = 1 << 10

func burnMain(args []string) int {
	units, err := strconv.Atoi(args[0])
	if err != nil || units < 1 {
		fmt.Fprintln(os.Stderr, "usage: bench -burn UNITS")
		return 2
	}
	threads, _ := strconv.Atoi(os.Getenv("EDGEPIPE_THREADS"))
	threads = max(threads, 1)
	runtime.GOMAXPROCS(threads)
	burn(units, threads)
	return 0
}

func burn(units, threads int) {
	var wg sync.WaitGroup
	for t := range threads {
		share := units / threads
		if t < units%threads {
			share++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for range share * burnUnit {
				s := sha256.Sum256(buf)
				buf[0] = s[0]
			}
		}()
	}
	wg.Wait()
}

// elasticStep is one user step of the benchmark's graph.
type elasticStep struct {
	id       string
	needs    []string
	units    int
	min, max int
}

// elasticGraph: the long single-threaded step has the most CPU of any
// chain, so it is the critical path; everything else (in units of the long
// step's tenth) fits beside it on the second core only if that core is not
// left idle waiting for two free cores.
func elasticGraph(long int) []elasticStep {
	u := long / 10
	return []elasticStep{
		{id: "long", units: long, min: 1, max: 1},
		{id: "a1", units: 3 * u, min: 1, max: 2},
		{id: "a2", needs: []string{"a1"}, units: u, min: 1, max: 1},
		{id: "a3", needs: []string{"a2"}, units: 2 * u, min: 1, max: 2},
		{id: "b1", units: 2 * u, min: 1, max: 2},
		{id: "b2", needs: []string{"b1"}, units: u, min: 1, max: 1},
	}
}

func elasticRecipe(self string, graph []elasticStep, rigid bool) string {
	var b strings.Builder
	b.WriteString("steps:\n")
	for _, s := range graph {
		lo := s.min
		if rigid {
			lo = s.max
		}
		fmt.Fprintf(&b, "  %s:\n    uses: run\n", s.id)
		if len(s.needs) > 0 {
			fmt.Fprintf(&b, "    needs: [%s]\n", strings.Join(s.needs, ", "))
		}
		fmt.Fprintf(&b, "    with: {argv: [%q, %q, %q], min_threads: %d, max_threads: %d}\n", self, burnArg, strconv.Itoa(s.units), lo, s.max)
	}
	return b.String()
}

func runElastic(ctx context.Context, e *env) (result, error) {
	res := result{}
	self, err := os.Executable()
	if err != nil {
		return res, err
	}
	dir, err := e.workdir("elastic")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	// Size the long step to about 6 s of one core here.
	start := time.Now()
	burn(10, 1)
	perUnit := time.Since(start) / 10
	long := max(10, int(6*time.Second/max(perUnit, time.Millisecond))/10*10)
	graph := elasticGraph(long)

	projects := map[string]string{}
	for _, mode := range []string{"elastic", "rigid"} {
		p := filepath.Join(dir, mode)
		if err := writeTinyProject(p, "elastic-"+mode, elasticRecipe(self, graph, mode == "rigid")); err != nil {
			return res, err
		}
		projects[mode] = p
	}
	cache := filepath.Join(dir, "cache")
	cmd := func(mode string) command {
		return command{argv: []string{e.edgepipe, "run", "-j", "2", "recipe.yaml"}, dir: projects[mode], env: e.standinEnv(cache)}
	}
	alone := command{argv: []string{self, burnArg, strconv.Itoa(long)}, dir: dir, env: []string{"EDGEPIPE_THREADS=1"}}

	e.logf("elastic: setup run (the recipe's target, cached afterwards); long step = %d units", long)
	if _, err := mustSucceed(ctx, cmd("rigid")); err != nil {
		return res, err
	}
	records := filepath.Join(cache, "records", "steps.json")
	var firsts, walls, rigids, crits []time.Duration
	for range e.slowReps {
		// Without the durations of a previous run, ready steps are ordered
		// by chain length, and the long step may start second.
		if err := os.Remove(records); err != nil && !os.IsNotExist(err) {
			return res, err
		}
		m, err := mustSucceed(ctx, cmd("elastic"))
		if err != nil {
			return res, err
		}
		firsts = append(firsts, m.wall)
		if m, err = mustSucceed(ctx, cmd("elastic")); err != nil {
			return res, err
		}
		walls = append(walls, m.wall)
		if m, err = mustSucceed(ctx, alone); err != nil {
			return res, err
		}
		crits = append(crits, m.wall)
		if m, err = mustSucceed(ctx, cmd("rigid")); err != nil {
			return res, err
		}
		rigids = append(rigids, m.wall)
	}
	wall, crit, rigid, first := benchstat.Median(walls), benchstat.Median(crits), benchstat.Median(rigids), benchstat.Median(firsts)
	res.add("wall_s", wall)
	res.add("first_run_ratio", first.Seconds()/crit.Seconds())
	res.add("critical_path_s", crit)
	res.add("rigid_wall_s", rigid)
	res.add("rigid_ratio", rigid.Seconds()/crit.Seconds())
	res.add("goal", "ratio<=1.15")
	ratio := wall.Seconds() / crit.Seconds()
	res.add("met", ratio <= 1.15)
	res.ratio = ratio
	return res, nil
}
