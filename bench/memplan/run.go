package memplan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/runstats"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// Config is one run of the benchmark.
type Config struct {
	Edgepipe string // the edgepipe binary
	Root     string // the repository: relative recipe paths are found from it
	// Recipes are the recipe files, one BENCH line each; the first one's
	// model is the one Fit refits on.
	Recipes []string
	// Cache is the edgepipe cache the runs use and whose records are read;
	// "" for EDGEPIPE_CACHE, else $XDG_CACHE_HOME/edgepipe, else
	// ~/.cache/edgepipe, as edgepipe itself chooses.
	Cache   string
	Env     []string // added to edgepipe run's environment (the tool path)
	Scratch string   // the runs publish under it; removed after each
	Fit     bool     // also print the constants that match the first model
	Log     io.Writer
}

// Line is one model's BENCH line: its key=values and its ratio.
type Line struct {
	Fields []Field
	Ratio  float64
}

// okExit are the exit codes a --keep-going run may end with on a host that
// cannot build every target: 1 (a step failed, e.g. one that needs an
// NVIDIA GPU) and 3 (a quality gate failed). Both leave the other steps
// run and recorded.
var okExit = []int{0, 1, 3}

// Run makes sure each recipe has run in the cache and compares its steps'
// predicted weights with their recorded peaks.
func Run(ctx context.Context, c Config) ([]Line, error) {
	cache, err := cacheRoot(c.Cache)
	if err != nil {
		return nil, err
	}
	var out []Line
	for i, r := range c.Recipes {
		l, err := measure(ctx, c, cache, r, c.Fit && i == 0)
		if err != nil {
			return out, fmt.Errorf("memory-plan %s: %w", r, err)
		}
		out = append(out, l)
	}
	return out, nil
}

func measure(ctx context.Context, c Config, cache, recipe string, fit bool) (Line, error) {
	if !filepath.IsAbs(recipe) {
		recipe = filepath.Join(c.Root, recipe)
	}
	pl, err := LoadPlan(recipe)
	if err != nil {
		return Line{}, err
	}
	failed, err := ensureRun(ctx, c, cache, recipe)
	if err != nil {
		return Line{}, err
	}
	largest, err := largestTensor(ctx, pl, cache)
	if err != nil {
		return Line{}, err
	}
	ss, modelBytes := Compare(pl, runstats.Open(filepath.Join(cache, "records", "steps.json")), failed, largest)
	sum := Summarize(ss)
	model := ModelName(pl)
	WriteTable(c.Log, model, modelBytes, ss, sum)
	if fit {
		fmt.Fprintf(c.Log, "  memory-plan fit on %s (a kind's two constants need both models: choose ones that hold on each):\n", model)
		for _, l := range Fit(sum.Kinds) {
			fmt.Fprintf(c.Log, "    %s\n", l)
		}
	}
	fields, ratio := sum.Fields(modelBytes)
	return Line{Fields: append([]Field{{"model", model}}, fields...), Ratio: ratio}, nil
}

// ensureRun runs the recipe without --force: instant when its steps are
// cached, and then the records are those of the run that made them. It
// returns the ids of the steps that failed.
func ensureRun(ctx context.Context, c Config, cache, recipe string) (map[string]bool, error) {
	out, err := os.MkdirTemp(c.Scratch, "memory-plan-*")
	if err != nil {
		return nil, fmt.Errorf("scratch folder: %w", err)
	}
	defer os.RemoveAll(out)
	cmd := exec.CommandContext(ctx, c.Edgepipe, "run", "--json", "--keep-going", "--out", filepath.Join(out, "out"), recipe)
	cmd.Dir = filepath.Dir(recipe)
	cmd.Env = append(append(os.Environ(), c.Env...), "EDGEPIPE_CACHE="+cache)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A tool's helper that outlives edgepipe may hold the pipes open.
	cmd.WaitDelay = 10 * time.Second
	fmt.Fprintf(c.Log, "  memory-plan: edgepipe run --keep-going %s (cache %s)\n", recipe, cache)
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return nil, fmt.Errorf("edgepipe run %s: %w", recipe, err)
	}
	if code := cmd.ProcessState.ExitCode(); !slices.Contains(okExit, code) {
		return nil, fmt.Errorf("edgepipe run %s exited %d:\n%s", recipe, code, tail(stderr.String()))
	}
	return failedSteps(stdout.Bytes())
}

// failedSteps reads the ids of the failed steps from run --json's events.
func failedSteps(jsonl []byte) (map[string]bool, error) {
	failed := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(jsonl))
	for {
		var ev event.Event
		if err := dec.Decode(&ev); errors.Is(err, io.EOF) {
			return failed, nil
		} else if err != nil {
			return nil, fmt.Errorf("read edgepipe run's --json events: %w", err)
		}
		if ev.Type == event.Failed && ev.Step != "" {
			failed[ev.Step] = true
		}
	}
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 1500 {
		s = "..." + s[len(s)-1500:]
	}
	return s
}

// cacheRoot is the cache edgepipe would use without --cache-dir; it is
// passed to the run as EDGEPIPE_CACHE, so the run and the records read
// here cannot disagree.
func cacheRoot(explicit string) (string, error) {
	if explicit != "" {
		return filepath.Abs(explicit)
	}
	root, err := cache.Root(os.Getenv)
	if err != nil {
		return "", err
	}
	return filepath.Abs(root)
}

// largestTensor is the recipe's built-in model's largest tensor, read
// from the provisioned checkpoint's headers as the scheduler reads it from
// the fetched source; 0 for another source (the formula then counts the
// whole model in its place, and the table says so by its figures).
func largestTensor(ctx context.Context, pl *plan.Plan, cacheRoot string) (int64, error) {
	name, ok := strings.CutPrefix(pl.Recipe.Model.Source, "builtin:")
	if !ok {
		return 0, nil
	}
	dir, err := toolchain.BuiltinModel(ctx, cacheRoot, name)
	if err != nil {
		return 0, fmt.Errorf("built-in model %s: %w", name, err)
	}
	n, err := edge.LargestTensorBytes(dir)
	if err != nil {
		return 0, fmt.Errorf("built-in model %s: %w", name, err)
	}
	return n, nil
}
