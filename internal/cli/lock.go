package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/engine"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/report"

	"github.com/edgepipe/edgepipe/internal/getter"
	"github.com/edgepipe/edgepipe/internal/lockfile"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

// cmdLock resolves a recipe afresh (a branch is fetched again to see where
// it points now) and writes RECIPE.lock.
func cmdLock(ctx context.Context, env *Env, args []string) error {
	var c common
	fs := flagSet(env, "lock", "lock [flags] RECIPE")
	c.register(fs, env, false)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("lock takes one recipe file, e.g. edgepipe lock recipes/demo.yaml")
	}
	pl, err := loadPlan(pos[0])
	if err != nil {
		return err
	}
	eng, cacheRoot, _, err := c.engine(env, pl, nil)
	if err != nil {
		return err
	}
	rep := newReporter(env, c.json, 1)
	eng.SetOnEvent(rep.event)
	eng.SetOnProgress(rep.progress)
	now, err := resolveLock(ctx, eng, pl, cacheRoot, true)
	rep.done()
	if err != nil {
		return err
	}
	path := lockfile.PathFor(pos[0])
	old, err := lockfile.Read(path)
	if err != nil {
		old = nil // unreadable: replaced below
	}
	status := "written"
	var changes []lockfile.Change
	if old != nil {
		changes = lockfile.Diff(old, now)
		status = "updated"
		if len(changes) == 0 {
			status = "unchanged"
		}
	}
	if status != "unchanged" {
		if err := lockfile.Write(path, now); err != nil {
			return err
		}
	}
	if c.json {
		return json.NewEncoder(env.Stdout).Encode(lockEvent{Event: "lock", Path: path, Status: status, Changes: changes})
	}
	fmt.Fprintf(env.Stdout, "%s: %s (%s)\n", path, status, lockSummary(now))
	for _, ch := range changes {
		fmt.Fprintf(env.Stdout, "  %s\n", ch)
	}
	return nil
}

// lockEvent is the JSON line lock and run --json print about the lock.
type lockEvent struct {
	Event   string            `json:"event"`
	Path    string            `json:"path"`
	Status  string            `json:"status"` // written, updated, unchanged, matches, differs, missing, unchecked
	Changes []lockfile.Change `json:"changes,omitempty"`
	Message string            `json:"message,omitempty"`
}

func lockSummary(l *lockfile.Lock) string {
	src := l.Source.URI
	if l.Source.Revision != "" {
		src += " at " + l.Source.Revision
	}
	return fmt.Sprintf("source %s, %d file(s); %d data file(s); %d tool(s) from %d toolchain(s)",
		src, len(l.Source.Files), len(l.Data), len(l.Tools), len(l.Toolchains))
}

// resolveLock works out what the plan's inputs are now: the source (from
// this run, the cache, or fetched), the data files and the tools. Nothing
// is rehashed that the cache or the stat memo already knows.
func resolveLock(ctx context.Context, eng *engine.Engine, pl *plan.Plan, cacheRoot string, refetch bool) (*lockfile.Lock, error) {
	l := &lockfile.Lock{
		LockVersion: lockfile.Version, EdgepipeVersion: Version,
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Source:   lockfile.Source{URI: getter.Redact(pl.Recipe.Model.Source), Files: []lockfile.File{}},
	}
	src, err := eng.ResolveSource(ctx, refetch)
	if err != nil {
		return nil, fmt.Errorf("resolve the source: %w", err)
	}
	for _, f := range src.ContentFiles() {
		l.Source.Files = append(l.Source.Files, lockfile.File{Path: f.Path, SHA256: f.SHA256, Size: f.Size})
	}
	if src.Result != nil {
		l.Source.Revision = src.Result.Revision
	}
	if l.Data, err = eng.ResolveData(); err != nil {
		return nil, err
	}
	tools, err := eng.ResolveTools()
	if err != nil {
		return nil, err
	}
	for _, t := range tools {
		lt := lockfile.Tool{From: t.Origin, Identity: t.Identity}
		name, fromToolchain := strings.CutPrefix(t.Origin, "toolchain ")
		if !fromToolchain {
			lt.Version = t.Version
		} else if _, seen := l.Toolchains[name]; !seen {
			inst, err := toolchain.Resolve(cacheRoot, name)
			if err != nil {
				return nil, err
			}
			if l.Toolchains == nil {
				l.Toolchains = map[string]lockfile.Toolchain{}
			}
			l.Toolchains[name] = lockfile.Toolchain{LockDigest: inst.LockDigest, Versions: inst.PinnedSummary()}
		}
		if l.Tools == nil {
			l.Tools = map[string]lockfile.Tool{}
		}
		l.Tools[t.Name] = lt
	}
	return l, nil
}

// runLock is what `run` does with the recipe's lock: --locked fails on any
// difference, --update-lock rewrites it, and by default a missing lock is
// written and a different one is reported and left alone.
type runLock struct {
	path, recipe string
	locked       bool
	update       bool
	// have is the lock on disk (nil when there is none).
	have *lockfile.Lock
	// pinned is the commit the source was pinned to, if any.
	pinned string
}

// openLock reads the recipe's lock and pins the plan's source to the
// locked commit (unless the lock is being updated): with a lock, a branch
// that moved since is not followed.
func openLock(recipe string, pl *plan.Plan, locked, update bool) (*runLock, error) {
	if locked && update {
		return nil, usageErr("--locked and --update-lock contradict each other: --locked fails when the lock is out of date, --update-lock rewrites it")
	}
	rl := &runLock{path: lockfile.PathFor(recipe), recipe: recipe, locked: locked, update: update}
	have, err := lockfile.Read(rl.path)
	if err != nil {
		if locked {
			return nil, &ExitError{Code: ExitLockMismatch, Err: err}
		}
		if !update {
			return nil, usageErr("%v (or pass --update-lock to replace it)", err)
		}
	}
	rl.have = have
	if have != nil && !update && have.Source.URI == getter.Redact(pl.Recipe.Model.Source) && have.Source.Revision != "" {
		if pinned, ok := steps.PinRevision(pl.Recipe.Model.Source, have.Source.Revision); ok {
			pl.SetSource(pinned)
			rl.pinned = have.Source.Revision
		}
	}
	return rl, nil
}

// check resolves the plan's inputs and compares them with the lock, or
// writes the lock. It runs after the reporter is attached: resolving may
// fetch the source.
func (rl *runLock) check(ctx context.Context, env *Env, rep *reporter, eng *engine.Engine, pl *plan.Plan, cacheRoot string) error {
	if rl.locked && rl.have == nil {
		return rl.fail(env, rep, &ExitError{Code: ExitLockMismatch, Err: fmt.Errorf("--locked, but %s has no lock (%s does not exist): run `edgepipe lock %s` and commit the lock", rl.recipe, rl.path, rl.recipe)}, nil)
	}
	now, err := resolveLock(ctx, eng, pl, cacheRoot, rl.update)
	if err != nil {
		if engine.IsInterrupted(err) {
			return err
		}
		if rl.locked {
			// Not a mismatch (exit 4): a tool or the source is missing.
			return fmt.Errorf("--locked: cannot check %s: %w", rl.path, err)
		}
		// The run reports the same problem where it happens; a lock is
		// written only from a complete resolution.
		rl.report(rep, "unchecked", nil, err.Error())
		return nil
	}
	if rl.have == nil || rl.update {
		var changes []lockfile.Change
		status := "written"
		if rl.have != nil {
			changes, status = lockfile.Diff(rl.have, now), "updated"
			if len(changes) == 0 {
				status = "unchanged"
			}
		}
		if status != "unchanged" {
			if err := lockfile.Write(rl.path, now); err != nil {
				if rl.update {
					return err
				}
				// A run that was not asked for a lock still runs.
				rl.report(rep, "unchecked", nil, err.Error())
				return nil
			}
		}
		rl.report(rep, status, changes, "")
		return nil
	}
	if !rl.locked && rl.have.Platform != now.Platform {
		// Every native digest would differ: say so once, not six times.
		rl.report(rep, "unchecked", nil, fmt.Sprintf("it was made on %s, this is %s (a lock holds one platform's tool builds)", rl.have.Platform, now.Platform))
		return nil
	}
	changes := lockfile.Diff(rl.have, now)
	if len(changes) == 0 {
		rl.report(rep, "matches", nil, "")
		return nil
	}
	mismatch := &lockfile.MismatchError{Path: rl.path, Recipe: rl.recipe, Changes: changes}
	if rl.locked {
		return rl.fail(env, rep, &ExitError{Code: ExitLockMismatch, Err: mismatch}, changes)
	}
	rl.report(rep, "differs", changes, "")
	if !rep.json {
		fmt.Fprintf(env.Stderr, "warning: %v\nThis run uses what resolves now and leaves the lock as it is; with --locked it would fail.\n", mismatch)
	}
	return nil
}

func (rl *runLock) report(rep *reporter, status string, changes []lockfile.Change, detail string) {
	if rl.pinned != "" {
		detail = strings.TrimPrefix(detail+"; source pinned to "+rl.pinned, "; ")
	}
	if rep.json {
		b, _ := json.Marshal(lockEvent{Event: "lock", Path: rl.path, Status: status, Changes: changes, Message: detail})
		rep.raw(string(b))
		return
	}
	if detail != "" {
		status += ": " + detail
	}
	line := fmt.Sprintf("%s lock     %s %s", time.Now().Format("15:04:05"), rl.path, status)
	if status == "updated" {
		for _, c := range changes {
			line += "\n  " + c.String()
		}
	}
	rep.raw(line)
}

// fail ends a run that cannot start because of its lock: the error goes
// to stderr by Main; --json and the CI job summary get it too.
func (rl *runLock) fail(env *Env, rep *reporter, err *ExitError, changes []lockfile.Change) error {
	if rep.json {
		status := "differs"
		if rl.have == nil {
			status = "missing"
		}
		b, _ := json.Marshal(lockEvent{Event: "lock", Path: rl.path, Status: status, Changes: changes})
		rep.raw(string(b))
	}
	if path := env.Getenv("GITHUB_STEP_SUMMARY"); path != "" && changes != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "## edgepipe: %s does not match\n\nNothing was run (exit %d). Accept the changes with `edgepipe run --update-lock %s` and commit the lock.\n\n| field | locked | now |\n|---|---|---|\n", report.MDText(rl.path), err.Code, report.MDText(rl.recipe))
		for _, c := range changes {
			fmt.Fprintf(&b, "| `%s` | `%s` | `%s` |\n", report.MDCode(c.Field), report.MDCode(lockfile.OrAbsent(c.Locked)), report.MDCode(lockfile.OrAbsent(c.Now)))
		}
		if werr := appendFile(path, []byte(b.String()+"\n")); werr != nil {
			return &ExitError{Code: err.Code, Err: errors.Join(err.Err, fmt.Errorf("append the job summary to $GITHUB_STEP_SUMMARY (%s): %w", path, werr))}
		}
	}
	return err
}
