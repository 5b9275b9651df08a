package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/edgepipe/edgepipe/internal/progress"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/host"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/remotecache"
	"github.com/edgepipe/edgepipe/internal/runreport"
	"github.com/edgepipe/edgepipe/internal/termstatus"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/spf13/pflag"

	"github.com/edgepipe/edgepipe/internal/engine"

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/event"

	"github.com/edgepipe/edgepipe/internal/provenance"
)

func cmdValidate(env *Env, fs *pflag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print JSON: ok with the target and step counts, or each error with its file, line, column and hint (exit 2)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usageErr("validate takes one recipe file")
		}
		p, err := loadLocalPlan(pos[0])
		var diags recipe.Diagnostics
		if *asJSON && errors.As(err, &diags) {
			if err := writeJSON(env.Stdout, validateJSON{Recipe: pos[0], Errors: diags}); err != nil {
				return err
			}
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("the recipe has %d error(s); nothing was run", diags.Count())}
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(env.Stdout, validateJSON{Recipe: pos[0], OK: true, Targets: len(p.Recipe.Targets), Steps: len(p.Steps)})
		}
		fmt.Fprintf(env.Stdout, "%s: ok (%s, %s)\n", pos[0], plural(len(p.Recipe.Targets), "target"), plural(len(p.Steps), "step"))
		return nil
	}
}

// validateJSON is `validate --json`.
type validateJSON struct {
	Recipe  string             `json:"recipe"`
	OK      bool               `json:"ok"`
	Targets int                `json:"targets,omitempty"`
	Steps   int                `json:"steps,omitempty"`
	Errors  recipe.Diagnostics `json:"errors,omitempty"`
}

func cmdRun(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, true)
	targets := targetFlag(fs)
	junit := fs.String("junit", "", "write each target's quality gate and each failed step as JUnit test cases to `FILE` (CI test reports)")
	locked := fs.Bool("locked", false, "fail (exit 4) unless RECIPE.lock exists and the recipe resolves exactly to it (CI)")
	updateLock := fs.Bool("update-lock", false, "resolve the recipe afresh and rewrite RECIPE.lock")
	noInstall := fs.Bool("no-install", false, "fail instead of installing the pinned toolchains the steps need (strict CI)")
	ray := registerRay(fs, env)
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usageErr("run takes one recipe file, e.g. edgepipe run recipes/demo.yaml")
		}
		// Refused now, not after hours of conversion.
		if err := checkOutput("--junit", *junit); err != nil {
			return err
		}
		pl, err := loadLocalPlan(pos[0])
		if err != nil {
			return err
		}
		lock, err := openLock(pos[0], pl, *locked, *updateLock)
		if err != nil {
			return err
		}
		// The recipe's targets, before --target narrows the plan: the
		// reports keep those an earlier run published.
		allTargets := pl.TargetNames()
		if len(*targets) > 0 {
			if *updateLock {
				return usageErr("--update-lock resolves the whole recipe: drop --target, or run `edgepipe lock %s`", pos[0])
			}
			lock.Partial = true
			if pl, err = selectTargets(pl, *targets); err != nil {
				return err
			}
		}
		eng, cacheRoot, out, err := c.engine(ctx, env, pl, nil)
		if err != nil {
			return err
		}
		if err := c.ensureToolchains(ctx, env, pl, cacheRoot, pos[0], !*noInstall); err != nil {
			return err
		}
		stopRay, err := ray(ctx, env, &c, eng, pl, pos[0], cacheRoot, *targets)
		if err != nil {
			return err
		}
		defer stopRay()
		if !c.json {
			for _, d := range plan.Notes(pl) {
				fmt.Fprintf(env.Stderr, "note: %s\n", d.Msg)
			}
		}
		rep := progress.New(env.progress(), c.json, len(pl.Steps))
		rep.Quiet = c.quiet
		rep.Live(c.verbose)
		ci := runreport.New(pl)
		ci.OutDir, ci.Version = out, Version
		if len(*targets) > 0 {
			ci.AllTargets = allTargets
		}
		eng.SetOnEvent(func(ev event.Event) { rep.Event(ev); ci.Event(ev) })
		eng.SetOnProgress(rep.Progress)
		eng.SetOnToolProgress(rep.ToolProgress)
		if err := lock.check(ctx, env, rep, eng, pl, cacheRoot); err != nil {
			rep.Done()
			return err
		}
		res, runErr := eng.Run(ctx)
		rep.Done()
		c.remoteSummary(env)
		colour := termstatus.ColourOn(env.StdoutIsTerminal, env.Getenv)
		if !c.json {
			runreport.WriteSummary(env.Stdout, env.Stderr, pl, res, colour)
		}
		// Job summary ($GITHUB_STEP_SUMMARY), --junit and the --json closing line.
		err = finish(ci, env, *junit, c.json, res, runError(res, runErr))
		if !c.json && res != nil {
			fmt.Fprintln(env.Stdout, rep.Summary(len(res.Published)))
			if paths := runreport.ReportPaths(out); len(paths) > 0 {
				fmt.Fprintf(env.Stdout, "report: %s\n", strings.Join(paths, ", "))
			}
		}
		return err
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
	var need *engine.NeedMissingError
	if errors.As(step, &need) {
		return &ExitError{Code: ExitNeedMissing, Err: step}
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

// budgets are the steps run at once and the memory budget in MiB (the
// unit of the steps' memory weights): the flags, else the recipe's
// resources, else the machine's. Memory flags and recipe keys are in GB,
// 1e9 bytes, as every memory figure edgepipe prints.
func (c *common) budgets(pl *plan.Plan) (jobs int, memMB int64) {
	// An explicit -j wins over the recipe, the recipe over the core count.
	switch {
	case c.jobs > 0:
		jobs = c.jobs
	case pl.Recipe.Resources.Jobs > 0:
		jobs = pl.Recipe.Resources.Jobs
	default:
		jobs = runtime.NumCPU()
	}
	gb := c.maxMemGB
	if gb == 0 {
		gb = pl.Recipe.Resources.MaxMemoryGB
	}
	if gb > 0 {
		return jobs, gbToMiB(gb)
	}
	return jobs, int64(host.MemoryGB() * 1024) // host.MemoryGB is GiB
}

// gbToMiB converts a memory figure in GB (1e9 bytes) to MiB.
func gbToMiB(gb float64) int64 { return int64(gb * 1e9 / (1 << 20)) }

// engine wires a plan to the cache, tools and data.
func (c *common) engine(ctx context.Context, env *Env, pl *plan.Plan, only []string) (*engine.Engine, string, string, error) {
	out := c.out
	if out == "" {
		out = filepath.Join("artifacts", pl.Recipe.Name)
	}
	out, err := filepath.Abs(out)
	if err != nil {
		return nil, "", "", err
	}
	// Checked before the cache is opened (which makes its folder).
	root, err := c.cacheRoot(env)
	if err != nil {
		return nil, "", "", err
	}
	if err := checkOutDir(out, root, pl.Recipe); err != nil {
		return nil, "", "", err
	}
	ca, err := c.openCache(env)
	if err != nil {
		return nil, "", "", err
	}
	// What killed runs left in tmp/ goes now, not at the next `cache gc`;
	// a dir another run is building in is held, and kept.
	if _, _, err := ca.CleanTemp(ctx); err != nil && ctx.Err() != nil {
		return nil, "", "", ctx.Err()
	}
	jobs, memMB := c.budgets(pl)
	opt := engine.Options{
		Cache: ca, OutDir: out, Jobs: jobs, MaxMemoryMB: memMB,
		KeepGoing: c.keepGoing, Force: c.force, Verify: c.verify,
		Tools:   c.toolResolver(pl, ca.Root()),
		Data:    data.Resolver(ca.Root(), pl.Recipe.Dir()),
		Version: Version, Only: only,
	}
	if c.verbose {
		opt.Verbose = env.toolOutput()
	}
	if opt.Signer, err = c.signer(env); err != nil {
		return nil, "", "", err
	}
	opt.Run = provenance.RunFromEnv(env.Getenv)
	opt.NoPush = c.noPush
	if c.store, err = c.remote.Open(ctx, opt.Signer, Version); err != nil {
		return nil, "", "", &ExitError{Code: ExitUsage, Err: err}
	} else if c.store != nil {
		opt.Remote, opt.RemoteStrict = c.store, c.strict
	}
	return engine.NewEngine(pl, opt), ca.Root(), out, nil
}

func cmdPlan(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, false)
	targets := targetFlag(fs)
	bundleOut := fs.String("bundle", "", "also write a self-contained step bundle (`FILE`, a tar: the plan, the recipe, its lock and its local files) for `edgepipe step run` on another machine")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usageErr("plan takes one recipe file")
		}
		if err := checkOutput("--bundle", *bundleOut); err != nil {
			return err
		}
		// A bundle's steps run elsewhere (Argo), where a local source may
		// be a path only the workers have.
		load := loadLocalPlan
		if *bundleOut != "" {
			load = loadPlan
		}
		pl, err := load(pos[0])
		if err != nil {
			return err
		}
		// The source as run would fetch it: pinned by the lock, if any.
		_, _ = openLock(pos[0], pl, false, false)
		if pl, err = selectTargets(pl, *targets); err != nil {
			return err
		}
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
		pj.Targets = *targets
		if *bundleOut != "" {
			if err := c.writeBundle(ctx, env, pl, pos[0], pj, *bundleOut); err != nil {
				return err
			}
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
	for _, f := range pl.Fits {
		for _, w := range f.Warnings {
			fmt.Fprintf(env.Stdout, "warning: target %s: %s\n", f.Target, w)
		}
	}
}

func cmdGraph(env *Env, fs *pflag.FlagSet) runFunc {
	format := fs.String("format", "dot", "dot or mermaid")
	targets := targetFlag(fs)
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usageErr("graph takes one recipe file")
		}
		pl, err := loadPlan(pos[0])
		if err != nil {
			return err
		}
		if pl, err = selectTargets(pl, *targets); err != nil {
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
			return usageErr("usage: edgepipe step run PLAN.json|BUNDLE STEP-ID")
		}
		c.strict = true
		pj, cleanup, err := c.openSaved(ctx, pos[1])
		defer cleanup()
		if err != nil {
			return err
		}
		pl, err := loadPlan(pj.Recipe)
		if err != nil {
			return err
		}
		// The source as the plan saw it: pinned by the lock, if any.
		_, _ = openLock(pj.Recipe, pl, false, false)
		// A plan saved with --target holds those targets' steps only.
		if pl, err = selectTargets(pl, pj.Targets); err != nil {
			return err
		}
		if err := pj.Check(pl); err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		step, ok := pl.Step(pos[2])
		if !ok {
			return usageErr("the plan has no step %q; `edgepipe plan %s` lists them", pos[2], pj.Recipe)
		}
		if err := c.checkSharing(step); err != nil {
			return err
		}
		eng, cacheRoot, _, err := c.engine(ctx, env, pl, []string{pos[2]})
		if err != nil {
			return err
		}
		// A worker installs what the step and the steps above it run (their
		// tools' identities are in its key), as run does on first use.
		if err := c.ensureToolchains(ctx, env, pl.Upstream(pos[2]), cacheRoot, pj.Recipe, true); err != nil {
			return err
		}
		rep := progress.New(env.progress(), c.json, 1)
		rep.Quiet = c.quiet
		rep.Live(c.verbose)
		eng.SetOnEvent(rep.Event)
		res, runErr := eng.Run(ctx)
		rep.Done()
		c.remoteSummary(env)
		return runError(res, runErr)
	}
}

// checkSharing refuses `step run` of a step whose output nobody else
// could read: with a remote cache it may not write to (read mode), a job
// would run, exit 0, and leave its output on a worker that is gone. A
// publish step is the exception: its output is the published folder
// (an Argo task's artifact), and it only reads its needs.
func (c *common) checkSharing(s *plan.Step) error {
	if c.remote.URL == "" || s.Kind == "publish" {
		return nil
	}
	if mode, err := remotecache.ParseMode(c.remote.Mode); err == nil && !mode.Writes() {
		return usageErr("step run %s with --remote-cache-mode %s would not share its output, so no other machine could use it: give --remote-cache-mode readwrite (a step job must write the remote cache), or run the recipe locally with `edgepipe run`", s.ID, mode)
	}
	return nil
}

// ensureToolchains installs the pinned toolchains the plan's steps need
// and are missing (or, with install false, refuses: exit 1 before
// anything runs), saying what and why; then marks them used now, for
// `toolchain list` and `cache gc`.
func (c *common) ensureToolchains(ctx context.Context, env *Env, pl *plan.Plan, root, recipePath string, install bool) error {
	needs := toolchain.Needed(root, pl.Tools(), c.toolResolver(pl, root).Local)
	err := toolchain.Ensure(ctx, root, needs, install, "edgepipe toolchain install --for "+recipePath, env.toolOutput())
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &ExitError{Code: ExitStepFailed, Err: err}
	}
	for _, n := range needs {
		toolchain.MarkUsed(root, n.Name)
	}
	return nil
}

// targetFlag is --target/-t: repeatable, globs allowed.
func targetFlag(fs *pflag.FlagSet) *[]string {
	return fs.StringSliceP("target", "t", nil, "only this target and the steps it needs (`NAME`, a glob such as 'laptop-*'; repeat or comma-separate for more)")
}

// selectTargets narrows the plan to the --target patterns; one that
// names no target is a usage error with the closest name.
func selectTargets(pl *plan.Plan, patterns []string) (*plan.Plan, error) {
	sel, err := plan.Select(pl, patterns)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	return sel, nil
}

// plural is "1 target", "2 targets".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// remoteSummary says what the remote cache moved (not under --json or -q).
func (c *common) remoteSummary(env *Env) {
	if c.store != nil && !c.json && !c.quiet {
		c.store.Summary(env.Stderr)
	}
}
