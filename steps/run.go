package steps

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// runKind runs a user command by argv (never through a shell), with
// ${NAME.outputs.ROLE} replaced by the path of an output of a step or
// target it needs. It is not cached: it is how recipes add smoke tests and
// uploads, which must run every time.
type runKind struct{}

// RunParams are a run step's: the command, by argv, and how many threads
// it can use. With max_threads over min_threads the step is elastic: it is
// granted what is free when it starts, and told so in EDGEPIPE_THREADS and
// OMP_NUM_THREADS (see Context.Threads).
type RunParams struct {
	Argv       []string `json:"argv"`
	MinThreads int      `json:"min_threads"`
	MaxThreads int      `json:"max_threads"`
}

func init() { Register(runKind{}) }

func (runKind) Name() string       { return "run" }
func (runKind) Version() int       { return 1 }
func (runKind) NewParams() any     { return &RunParams{} }
func (runKind) Tools(any) []string { return nil }
func (runKind) Resources(p any) Resources {
	rp := ParamsOf[RunParams](p)
	hi := max(rp.MaxThreads, rp.MinThreads, 1)
	return Resources{Cores: hi, MinCores: min(max(rp.MinThreads, 1), hi)}
}

// Uncached marks kinds that run every time and never enter the cache.
type Uncached interface{ Uncached() }

func (runKind) Uncached() {}

var outputRef = regexp.MustCompile(`\$\{([a-z0-9][a-z0-9._:+@-]*)\.outputs\.([a-z0-9_]+)\}`)

func (runKind) Run(ctx context.Context, sc *Context) error {
	argv := append([]string(nil), ParamsOf[RunParams](sc.Params).Argv...)
	if len(argv) == 0 {
		return fmt.Errorf("step %s: with.argv must be a non-empty list, e.g. argv: [python3, smoke.py, \"${my-target.outputs.model}\"]", sc.StepID)
	}
	if p := ParamsOf[RunParams](sc.Params); p.MinThreads < 0 || p.MaxThreads < 0 {
		return fmt.Errorf("step %s: with.min_threads and with.max_threads must not be negative (got %d and %d)", sc.StepID, p.MinThreads, p.MaxThreads)
	}
	var expandErr error
	for i, a := range argv {
		argv[i] = outputRef.ReplaceAllStringFunc(a, func(ref string) string {
			m := outputRef.FindStringSubmatch(ref)
			p, err := sc.OutputPath(m[1], m[2])
			if err != nil && expandErr == nil {
				expandErr = err
			}
			return p
		})
	}
	if expandErr != nil {
		return expandErr
	}
	if !filepath.IsAbs(argv[0]) && strings.Contains(argv[0], "/") {
		argv[0] = filepath.Join(sc.RecipeDir, argv[0])
	}
	sc.Result.Argv = append(sc.Result.Argv, argv)
	// User commands run where the recipe is, like a Makefile's.
	sc.ExecDir = sc.RecipeDir
	return sc.Exec(ctx, argv, nil)
}

// OutputPath resolves ${name.outputs.role}: name is a step id, or a target
// name (its published folder).
func (sc *Context) OutputPath(name, role string) (string, error) {
	for _, in := range sc.Inputs {
		if in.StepID != name && in.StepID != "publish:"+name {
			continue
		}
		if role == "dir" {
			return in.Dir, nil
		}
		if in.Result != nil {
			if rel, ok := in.Result.Files[role]; ok {
				return filepath.Join(in.Dir, rel), nil
			}
		}
		return "", fmt.Errorf("step %s: %s has no output %q", sc.StepID, name, role)
	}
	return "", fmt.Errorf("step %s refers to ${%s.outputs.%s} but does not need %s: add it to needs", sc.StepID, name, role, name)
}
