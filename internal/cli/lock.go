package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/edgepipe/edgepipe/internal/progress"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/lock"
	"github.com/edgepipe/edgepipe/internal/runreport"
	"github.com/spf13/pflag"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/report"

	"github.com/edgepipe/edgepipe/internal/lockfile"
)

// cmdLock resolves a recipe afresh (a branch is fetched again to see where
// it points now) and writes RECIPE.lock.
func cmdLock(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, false)
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usageErr("lock takes one recipe file, e.g. edgepipe lock recipes/demo.yaml")
		}
		pl, err := loadPlan(pos[0])
		if err != nil {
			return err
		}
		eng, cacheRoot, _, err := c.engine(ctx, env, pl, nil)
		if err != nil {
			return err
		}
		rep := progress.New(env.progress(), c.json, 1)
		rep.Quiet = c.quiet
		rep.Live(c.verbose)
		eng.SetOnEvent(rep.Event)
		eng.SetOnProgress(rep.Progress)
		now, err := lock.Resolve(ctx, eng, pl, cacheRoot, Version, true)
		rep.Done()
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

// runLock is a run's lock (lock.State) with its presentation.
type runLock struct{ *lock.State }

// openLock reads the recipe's lock and pins the plan's source to it.
func openLock(recipe string, pl *plan.Plan, locked, update bool) (*runLock, error) {
	st, err := lock.Open(recipe, pl, locked, update)
	var unreadable *lock.UnreadableError
	switch {
	case errors.Is(err, lock.ErrContradiction):
		return nil, usageErr("%v", err)
	case errors.As(err, &unreadable) && unreadable.Locked:
		return nil, &ExitError{Code: ExitLockMismatch, Err: err}
	case err != nil:
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	return &runLock{st}, nil
}

// check resolves the plan's inputs and compares them with the lock, or
// writes the lock. It runs after the reporter is attached: resolving may
// fetch the source.
func (rl *runLock) check(ctx context.Context, env *Env, rep *progress.Reporter, eng *engine.Engine, pl *plan.Plan, cacheRoot string) error {
	out, err := rl.Check(ctx, eng, pl, cacheRoot, Version)
	var missing *lock.MissingError
	var mismatch *lockfile.MismatchError
	switch {
	case errors.As(err, &missing):
		return rl.fail(env, rep, &ExitError{Code: ExitLockMismatch, Err: err}, nil)
	case errors.As(err, &mismatch):
		return rl.fail(env, rep, &ExitError{Code: ExitLockMismatch, Err: err}, out.Changes)
	case err != nil:
		return err
	}
	rl.report(rep, out.Status, out.Changes, out.Detail)
	if out.Mismatch != nil && !rep.JSON() {
		fmt.Fprintf(env.Stderr, "warning: %v\nThis run uses what resolves now and leaves the lock as it is; with --locked it would fail.\n", out.Mismatch)
	}
	return nil
}

func (rl *runLock) report(rep *progress.Reporter, status string, changes []lockfile.Change, detail string) {
	if rl.Pinned != "" {
		detail = strings.TrimPrefix(detail+"; source pinned to "+rl.Pinned, "; ")
	}
	if rep.JSON() {
		b, _ := json.Marshal(lockEvent{Event: "lock", Path: rl.Path, Status: status, Changes: changes, Message: detail})
		rep.Raw(string(b))
		return
	}
	if detail != "" {
		status += ": " + detail
	}
	line := fmt.Sprintf("%s lock     %s %s", time.Now().Format("15:04:05"), rl.Path, status)
	if status == "updated" {
		for _, c := range changes {
			line += "\n  " + c.String()
		}
	}
	rep.Raw(line)
}

// fail ends a run that cannot start because of its lock: the error goes
// to stderr by Main; --json and the CI job summary get it too.
func (rl *runLock) fail(env *Env, rep *progress.Reporter, err *ExitError, changes []lockfile.Change) error {
	if rep.JSON() {
		status := "differs"
		if rl.Have == nil {
			status = "missing"
		}
		b, _ := json.Marshal(lockEvent{Event: "lock", Path: rl.Path, Status: status, Changes: changes})
		rep.Raw(string(b))
	}
	if path := env.Getenv("GITHUB_STEP_SUMMARY"); path != "" && changes != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "## edgepipe: %s does not match\n\nNothing was run (exit %d). Accept the changes with `edgepipe run --update-lock %s` and commit the lock.\n\n| field | locked | now |\n|---|---|---|\n", report.MDText(rl.Path), err.Code, report.MDText(rl.Recipe))
		for _, c := range changes {
			fmt.Fprintf(&b, "| `%s` | `%s` | `%s` |\n", report.MDCode(c.Field), report.MDCode(lockfile.OrAbsent(c.Locked)), report.MDCode(lockfile.OrAbsent(c.Now)))
		}
		if werr := runreport.AppendFile(path, []byte(b.String()+"\n")); werr != nil {
			return &ExitError{Code: err.Code, Err: errors.Join(err.Err, fmt.Errorf("append the job summary to $GITHUB_STEP_SUMMARY (%s): %w", path, werr))}
		}
	}
	return err
}
