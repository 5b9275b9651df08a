// Command bench runs edgepipe's benchmarks (`go tool task bench`). Each one
// prints a short explanation and then exactly one line
//
//	BENCH <name> <key=value ...> ratio=<x>
//
// comparing edgepipe with a peer measured in the same run on the same
// files, so a busy or slow machine moves both sides. Timings are the median
// of a few alternating runs. A benchmark that cannot run here prints
// `BENCH <name> skipped reason=...` instead. Name benchmarks as arguments to
// run only those (`go tool task bench -- noop-rerun hash`); with none, all run.
//
// Test data (several GiB for noop-rerun and hash) is written under -tmp and
// removed afterwards, also on Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// benchmark is one named measurement. run returns its result; an error
// means it could not measure (a skip is a result, not an error).
type benchmark struct {
	name  string
	about func(e *env) string // the explanation printed before the BENCH line
	run   func(ctx context.Context, e *env) (result, error)
	// runAll, instead of run, measures several things and prints a BENCH
	// line for each (quality: one per model).
	runAll func(ctx context.Context, e *env) ([]result, error)
}

var benchmarks = []benchmark{
	noopRerunBench,
	schedulerBench,
	elasticBench,
	scaleBench,
	hashBench,
	demoOverheadBench,
	demoRerunBench,
	waitPolicyBench,
	allTargetsBench,
	qualityBench,
	memoryPlanBench,
	remoteCacheBench,
	rayBench,
	archsBench,
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == burnArg {
		os.Exit(burnMain(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := mainErr(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func mainErr(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := config{}
	fs.StringVar(&cfg.root, "root", "", "edgepipe repository root (default: found from the working directory)")
	fs.StringVar(&cfg.tmp, "tmp", os.TempDir(), "where test data is written (several GiB, removed afterwards)")
	fs.IntVar(&cfg.reps, "reps", 5, "timed runs of each fast measurement; the median counts")
	fs.IntVar(&cfg.slowReps, "slow-reps", 3, "timed runs of each measurement that takes seconds; the median counts")
	fs.Int64Var(&cfg.noopBytes, "noop-size", 4<<30, "bytes of model inputs for noop-rerun")
	fs.Int64Var(&cfg.hashBytes, "hash-size", 2<<30, "bytes of the file hashed by hash")
	fs.IntVar(&cfg.schedSteps, "sched-steps", 1000, "user steps in the scheduler benchmark's graph")
	fs.StringVar(&cfg.allTargetsRecipe, "all-targets-recipe", "recipes/all-targets.yaml", "the every-target recipe (relative to -root)")
	fs.StringVar(&cfg.archsModels, "archs-models", strings.Join(archsModels, ","), "the tiny models archs runs (the first is the ratio's peer)")
	fs.StringVar(&cfg.archsOut, "archs-out", filepath.Join(os.TempDir(), "edgepipe-archs.md"), "where archs writes its matrix (Markdown)")
	fs.StringVar(&cfg.keepOut, "all-targets-out", "", "publish all-targets' artifacts here and keep them (default: a temporary folder, removed)")
	fs.StringVar(&cfg.memPlanRecipes, "memory-plan-recipes", "recipes/all-targets.yaml,recipes/gemma.yaml", "memory-plan's recipes, comma-separated, one per built-in model (relative to -root); the first is the one -memory-plan-fit fits on")
	fs.BoolVar(&cfg.memPlanFit, "memory-plan-fit", false, "memory-plan also prints, per kind, the constant that would make the formula match the first recipe's measurement (for refitting; checks nothing)")
	fs.BoolVar(&cfg.peerPassive, "demo-peer-passive", false, "demo-overhead's shell peer exports OMP_WAIT_POLICY=PASSIVE for every step (edgepipe gives it to its torch steps; its llama.cpp steps keep the default)")
	fs.BoolVar(&cfg.strict, "strict", false, "exit 1 when a benchmark misses its goal (goals are always printed as met=yes|no)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./bench [flags] [BENCHMARK...]\n\nbenchmarks: %s\n\nflags:\n", strings.Join(names(), ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	selected, err := selectBenchmarks(fs.Args())
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	e, err := newEnv(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	defer e.close()

	code := 0
	for _, b := range selected {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(stdout, "# %s: %s\n", b.name, b.about(e))
		results, err := b.measure(ctx, e)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				fmt.Fprintln(stderr, "bench: interrupted")
				return 130
			}
			fmt.Fprintf(stderr, "bench: %s: %v\n", b.name, err)
			results = append(results, result{name: b.name, skipped: "failed: " + firstLine(err.Error())})
			code = 1
		}
		for _, res := range results {
			res.name = b.name
			fmt.Fprintln(stdout, res.line())
			if cfg.strict && res.missedGoal() {
				code = 1
			}
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "bench: interrupted")
		return 130
	}
	return code
}

// measure runs the benchmark: one result, or several for a runAll.
func (b benchmark) measure(ctx context.Context, e *env) ([]result, error) {
	if b.runAll != nil {
		return b.runAll(ctx, e)
	}
	res, err := b.run(ctx, e)
	if err != nil {
		return nil, err
	}
	return []result{res}, nil
}

func (r result) missedGoal() bool {
	for _, p := range r.keys {
		if p.key == "met" && p.value == "no" {
			return true
		}
	}
	return false
}

func names() []string {
	var out []string
	for _, b := range benchmarks {
		out = append(out, b.name)
	}
	return out
}

// selectBenchmarks keeps the registry's order whatever the argument order,
// so that a run's output always reads the same way.
func selectBenchmarks(args []string) ([]benchmark, error) {
	if len(args) == 0 {
		return benchmarks, nil
	}
	for _, a := range args {
		if !slices.Contains(names(), a) {
			return nil, fmt.Errorf("no benchmark named %q; choose from %s", a, strings.Join(names(), ", "))
		}
	}
	var out []benchmark
	for _, b := range benchmarks {
		if slices.Contains(args, b.name) {
			out = append(out, b)
		}
	}
	return out, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

type config struct {
	root             string
	tmp              string
	reps, slowReps   int
	noopBytes        int64
	hashBytes        int64
	schedSteps       int
	allTargetsRecipe string
	keepOut          string
	archsOut         string
	archsModels      string
	memPlanRecipes   string
	memPlanFit       bool
	peerPassive      bool
	strict           bool
}

// env is what every benchmark shares: the tools under test and a scratch
// folder that is removed at the end.
type env struct {
	config
	edgepipe string // bin/edgepipe
	standins string // bin/standins, for EDGEPIPE_TOOL_PATH
	scratch  string
	log      io.Writer

	taskBin string // go-task, found on first use

	// demoCold is the median cold -j 2 demo run of demo-overhead, reused
	// by demo-rerun as its peer.
	demoCold *demoColdRun
}

func newEnv(cfg config, log io.Writer) (*env, error) {
	if cfg.reps < 1 || cfg.slowReps < 1 {
		return nil, fmt.Errorf("-reps and -slow-reps must be at least 1")
	}
	root, err := findRoot(cfg.root)
	if err != nil {
		return nil, err
	}
	cfg.root = root
	e := &env{config: cfg, log: log,
		edgepipe: filepath.Join(root, "bin", "edgepipe"),
		standins: filepath.Join(root, "bin", "standins"),
	}
	for _, p := range []string{e.edgepipe, filepath.Join(e.standins, "convert_hf_to_gguf.py")} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s is missing: run the benchmarks with `go tool task bench`, which builds it (or run `go tool task build standins` first)", p)
		}
	}
	if err := os.MkdirAll(cfg.tmp, 0o755); err != nil {
		return nil, fmt.Errorf("scratch folder: %w", err)
	}
	e.scratch, err = os.MkdirTemp(cfg.tmp, "edgepipe-bench-*")
	if err != nil {
		return nil, fmt.Errorf("scratch folder: %w", err)
	}
	return e, nil
}

func (e *env) close() {
	if err := os.RemoveAll(e.scratch); err != nil {
		fmt.Fprintf(e.log, "bench: could not remove %s: %v\n", e.scratch, err)
	}
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.log, "  "+format+"\n", args...)
}

// workdir makes a fresh folder for one benchmark; remove it when done, so
// the big files of one benchmark are gone before the next writes its own.
func (e *env) workdir(name string) (string, error) {
	return os.MkdirTemp(e.scratch, name+"-*")
}

// standinEnv is the environment for edgepipe runs on the stand-in tools,
// with their own cache folder.
func (e *env) standinEnv(cache string) []string {
	return []string{"EDGEPIPE_CACHE=" + cache, "EDGEPIPE_TOOL_PATH=" + e.standins}
}

// findRoot walks up from dir (or the working directory) to the folder
// whose go.mod declares the edgepipe module.
func findRoot(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		dir = wd
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/edgepipe/edgepipe\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no edgepipe checkout at or above %s: run from the repository, or pass -root", dir)
		}
	}
}
