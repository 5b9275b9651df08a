package shared

import (
	"context"
	"fmt"
	"github.com/edgepipe/edgepipe/steps"
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

func init() { steps.Register(runKind{}) }

func (runKind) Name() string       { return "run" }
func (runKind) Version() int       { return 1 }
func (runKind) NewParams() any     { return &RunParams{} }
func (runKind) Tools(any) []string { return nil }
func (runKind) Resources(p any) steps.Resources {
	rp := steps.ParamsOf[RunParams](p)
	hi := max(rp.MaxThreads, rp.MinThreads, 1)
	return steps.Resources{Cores: hi, MinCores: min(max(rp.MinThreads, 1), hi)}
}

func (runKind) Uncached() {}

var outputRef = regexp.MustCompile(`\$\{([a-z0-9][a-z0-9._:+@-]*)\.outputs\.([a-z0-9_]+)\}`)

func (runKind) Run(ctx context.Context, sc *steps.Context) error {
	argv := append([]string(nil), steps.ParamsOf[RunParams](sc.Params).Argv...)
	if len(argv) == 0 {
		return fmt.Errorf("step %s: with.argv must be a non-empty list, e.g. argv: [python3, smoke.py, \"${my-target.outputs.model}\"]", sc.StepID)
	}
	if p := steps.ParamsOf[RunParams](sc.Params); p.MinThreads < 0 || p.MaxThreads < 0 {
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
