package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/host"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/runreport"
	"github.com/spf13/pflag"

	"github.com/edgepipe/edgepipe/internal/engine"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/event"

	"github.com/edgepipe/edgepipe/internal/provenance"
)

func cmdValidate(env *Env, fs *pflag.FlagSet) runFunc {

	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usageErr("validate takes one recipe file")
		}
		p, err := loadPlan(pos[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "%s: ok (%s, %s)\n", pos[0], plural(len(p.Recipe.Targets), "target"), plural(len(p.Steps), "step"))
		return nil
	}
}

func cmdRun(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, true)
	junit := fs.String("junit", "", "write each target's quality gate and each failed step as JUnit test cases to `FILE` (CI test reports)")
	locked := fs.Bool("locked", false, "fail (exit 4) unless RECIPE.lock exists and the recipe resolves exactly to it (CI)")
	updateLock := fs.Bool("update-lock", false, "resolve the recipe afresh and rewrite RECIPE.lock")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usageErr("run takes one recipe file, e.g. edgepipe run recipes/demo.yaml")
		}
		pl, err := loadPlan(pos[0])
		if err != nil {
			return err
		}
		lock, err := openLock(pos[0], pl, *locked, *updateLock)
		if err != nil {
			return err
		}
		eng, cacheRoot, out, err := c.engine(ctx, env, pl, nil)
		if err != nil {
			return err
		}
		if !c.json {
			for _, d := range plan.Notes(pl) {
				fmt.Fprintf(env.Stderr, "note: %s\n", d.Msg)
			}
		}
		rep := newReporter(env, c.json, len(pl.Steps))
		rep.quiet = c.quiet
		ci := runreport.New(pl)
		ci.OutDir = out
		eng.SetOnEvent(func(ev event.Event) { rep.event(ev); ci.Event(ev) })
		eng.SetOnProgress(rep.progress)
		if err := lock.check(ctx, env, rep, eng, pl, cacheRoot); err != nil {
			rep.done()
			return err
		}
		res, runErr := eng.Run(ctx)
		rep.done()
		if !c.json {
			runreport.WriteSummary(env.Stdout, env.Stderr, pl, res)
		}
		// Job summary ($GITHUB_STEP_SUMMARY), --junit and the --json closing line.
		return finish(ci, env, *junit, c.json, res, runError(res, runErr))
	}
}

// runError picks the exit status: interrupted beats everything, then a
// failed step, then a failed gate, then a failed push.
func runError(res *engine.RunResult, runErr error) error {
	if runErr == nil {
		return nil
	}
	if engine.IsInterrupted(runErr) {
		return runErr
	}
	var gate, step, push error
	for _, e := range res.Failed {
		switch {
		case publish.IsGateFailure(e):
			if gate == nil {
				gate = e
			}
		case publish.IsPushFailure(e):
			if push == nil {
				push = e
			}
		case step == nil:
			step = e
		}
	}
	if step != nil {
		n := len(res.Failed)
		if n > 1 {
			return &ExitError{Code: ExitStepFailed, Err: fmt.Errorf("%d failures; the first: %w", n, step)}
		}
		return &ExitError{Code: ExitStepFailed, Err: step}
	}
	if gate != nil {
		return &ExitError{Code: ExitGateFailed, Err: gate}
	}
	if push != nil {
		return &ExitError{Code: ExitPushFailed, Err: push}
	}
	return runErr
}

// budgets are the steps run at once and the memory budget in GiB: the
// flags, else the recipe's resources, else the machine's.
func (c *common) budgets(pl *plan.Plan) (jobs int, memGB float64) {
	// An explicit -j wins over the recipe, the recipe over the core count.
	switch {
	case c.jobs > 0:
		jobs = c.jobs
	case pl.Recipe.Resources.Jobs > 0:
		jobs = pl.Recipe.Resources.Jobs
	default:
		jobs = runtime.NumCPU()
	}
	memGB = c.maxMemGB
	if memGB == 0 {
		memGB = pl.Recipe.Resources.MaxMemoryGB
	}
	if memGB == 0 {
		memGB = host.MemoryGB()
	}
	return jobs, memGB
}

// engine wires a plan to the cache, tools and data.
func (c *common) engine(ctx context.Context, env *Env, pl *plan.Plan, only []string) (*engine.Engine, string, string, error) {
	ca, err := c.openCache(env)
	if err != nil {
		return nil, "", "", err
	}
	// What killed runs left in tmp/ goes now, not at the next `cache gc`;
	// a dir another run is building in is held, and kept.
	if _, _, err := ca.CleanTemp(ctx); err != nil && ctx.Err() != nil {
		return nil, "", "", ctx.Err()
	}
	out := c.out
	if out == "" {
		out = filepath.Join("artifacts", pl.Recipe.Name)
	}
	out, err = filepath.Abs(out)
	if err != nil {
		return nil, "", "", err
	}
	if err := checkOutDir(out, pl.Recipe); err != nil {
		return nil, "", "", err
	}
	jobs, memGB := c.budgets(pl)
	opt := engine.Options{
		Cache: ca, OutDir: out, Jobs: jobs, MaxMemoryMB: int64(memGB * 1024),
		KeepGoing: c.keepGoing, Force: c.force, Verify: c.verify,
		Tools:   c.toolResolver(pl, ca.Root()),
		Data:    data.Resolver(ca.Root(), pl.Recipe.Dir()),
		Version: Version, Only: only,
	}
	if c.verbose {
		opt.Verbose = env.Stderr
	}
	if opt.Signer, err = c.signer(env); err != nil {
		return nil, "", "", err
	}
	opt.Run = provenance.RunFromEnv(env.Getenv)
	opt.NoPush = c.noPush
	return engine.NewEngine(pl, opt), ca.Root(), out, nil
}

func cmdPlan(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, false)
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usageErr("plan takes one recipe file")
		}
		pl, err := loadPlan(pos[0])
		if err != nil {
			return err
		}
		// The source as run would fetch it: pinned by the lock, if any.
		_, _ = openLock(pos[0], pl, false, false)
		eng, _, _, err := c.engine(ctx, env, pl, nil)
		if err != nil {
			return err
		}
		status := eng.CacheStatus(ctx)
		abs, _ := filepath.Abs(pos[0])
		pj, err := plan.Save(pl, abs, status)
		if err != nil {
			return err
		}
		if c.json {
			enc := json.NewEncoder(env.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(pj)
		}
		fmt.Fprintf(env.Stdout, "recipe %s: %s, %s\n", pl.Recipe.Name, plural(len(pl.Recipe.Targets), "target"), plural(len(pl.Steps), "step"))
		pred := eng.Predict(ctx)
		for _, s := range pl.Steps {
			st := status[s.ID]
			needs := ""
			if len(s.Needs) > 0 {
				needs = " <- " + strings.Join(s.Needs, ", ")
			}
			fmt.Fprintf(env.Stdout, "  [%-9s] %-32s %-14s %s%s\n", st, s.ID, s.Kind, engine.FormatPrediction(pred[s.ID]), needs)
		}
		printPlanNotes(env, pl)
		return nil
	}
}

// printPlanNotes says up front what the run will not be able to do on
// this host (formats that need an NVIDIA GPU) and what the pre-flight
// could only warn about or assume.
func printPlanNotes(env *Env, pl *plan.Plan) {
	for _, d := range plan.Notes(pl) {
		fmt.Fprintf(env.Stdout, "note: %s\n  %s\n", d.Msg, d.Hint)
	}
	_, fits := edge.Preflight(pl.Recipe)
	for _, f := range fits {
		for _, w := range f.Warnings {
			fmt.Fprintf(env.Stdout, "warning: target %s: %s\n", f.Target, w)
		}
	}
}

func cmdGraph(env *Env, fs *pflag.FlagSet) runFunc {
	format := fs.String("format", "dot", "dot or mermaid")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usageErr("graph takes one recipe file")
		}
		pl, err := loadPlan(pos[0])
		if err != nil {
			return err
		}
		switch *format {
		case "dot":
			pl.WriteDot(env.Stdout)
		case "mermaid":
			pl.WriteMermaid(env.Stdout)
		default:
			return usageErr("--format must be dot or mermaid, not %q", *format)
		}
		return nil
	}
}

// cmdStep runs a single step from a saved plan (`edgepipe plan --json R >
// plan.json`), as a distributed engine would: the step's needs must
// already be in the cache.
func cmdStep(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, true)
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 3 || pos[0] != "run" {
			return usageErr("usage: edgepipe step run PLAN.json STEP-ID")
		}
		b, err := boundedfile.Read(pos[1], boundedfile.ManifestLimit)
		if err != nil {
			return usageErr("read the plan: %v", err)
		}
		var pj plan.Saved
		if err := json.Unmarshal(b, &pj); err != nil {
			return usageErr("%s is not a plan written by `edgepipe plan --json`: %v", pos[1], err)
		}
		pl, err := loadPlan(pj.Recipe)
		if err != nil {
			return err
		}
		if err := pj.Check(pl); err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		// The source as the plan saw it: pinned by the lock, if any.
		_, _ = openLock(pj.Recipe, pl, false, false)
		if _, ok := pl.Step(pos[2]); !ok {
			return usageErr("the plan has no step %q; `edgepipe plan %s` lists them", pos[2], pj.Recipe)
		}
		eng, _, _, err := c.engine(ctx, env, pl, []string{pos[2]})
		if err != nil {
			return err
		}
		rep := newReporter(env, c.json, 1)
		rep.quiet = c.quiet
		eng.SetOnEvent(rep.event)
		res, runErr := eng.Run(ctx)
		rep.done()
		return runError(res, runErr)
	}
}

// plural is "1 target", "2 targets".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
