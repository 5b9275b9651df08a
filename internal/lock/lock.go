// Package lock is what a run does with its recipe's lock file: resolve the
// plan's inputs (source files, data, tools) into a lockfile.Lock, pin the
// source to the locked commit, and compare or rewrite the lock: --locked
// fails on any difference, --update-lock rewrites it, and by default a
// missing lock is written and a different one reported and left alone.
package lock

import (
	"context"
	"errors"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"runtime"
	"strings"

	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/getter"
	"github.com/edgepipe/edgepipe/internal/lockfile"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// Resolve works out what the plan's inputs are now: the source (from
// this run, the cache, or fetched), the data files and the tools. Nothing
// is rehashed that the cache or the stat memo already knows.
func Resolve(ctx context.Context, eng *engine.Engine, pl *plan.Plan, cacheRoot, version string, refetch bool) (*lockfile.Lock, error) {
	l := &lockfile.Lock{
		LockVersion: lockfile.Version, EdgepipeVersion: version,
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
	tools, err := eng.ResolveTools(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tools {
		lt := lockfile.Tool{From: t.Origin, Identity: t.Identity}
		name, fromToolchain := strings.CutPrefix(t.Origin, "toolchain ")
		if !fromToolchain || toolchain.IsSystem(name) {
			// A system package (Debian's chromium) has no lock of its own:
			// its version is what the lock holds.
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

// State is a run's lock: the one on disk and how the run treats it.
type State struct {
	Path, Recipe string
	Locked       bool
	Update       bool
	// Have is the lock on disk (nil when there is none).
	Have *lockfile.Lock
	// Pinned is the commit the source was pinned to, if any.
	Pinned string
	// Partial: the run selected some targets (--target), so what resolves
	// now covers only their steps. The lock is compared on those entries
	// and never written from a partial resolution.
	Partial bool
}

// ErrContradiction is --locked together with --update-lock.
var ErrContradiction = errors.New("--locked and --update-lock contradict each other: --locked fails when the lock is out of date, --update-lock rewrites it")

// MissingError is --locked without a lock file.
type MissingError struct{ Path, Recipe string }

func (e *MissingError) Error() string {
	return fmt.Sprintf("--locked, but %s has no lock (%s does not exist): run `edgepipe lock %s` and commit the lock", e.Recipe, e.Path, e.Recipe)
}

// UnreadableError is a lock file that does not parse.
type UnreadableError struct {
	Err    error
	Locked bool
}

func (e *UnreadableError) Error() string {
	if e.Locked {
		return e.Err.Error()
	}
	return fmt.Sprintf("%v (or pass --update-lock to replace it)", e.Err)
}
func (e *UnreadableError) Unwrap() error { return e.Err }

// Open reads the recipe's lock and pins the plan's source to the locked
// commit (unless the lock is being updated): with a lock, a branch that
// moved since is not followed.
func Open(recipe string, pl *plan.Plan, locked, update bool) (*State, error) {
	if locked && update {
		return nil, ErrContradiction
	}
	st := &State{Path: lockfile.PathFor(recipe), Recipe: recipe, Locked: locked, Update: update}
	have, err := lockfile.Read(st.Path)
	if err != nil && (locked || !update) {
		return nil, &UnreadableError{Err: err, Locked: locked}
	}
	st.Have = have
	if have != nil && !update && have.Source.URI == getter.Redact(pl.Recipe.Model.Source) && have.Source.Revision != "" {
		if pinned, ok := shared.PinRevision(pl.Recipe.Model.Source, have.Source.Revision); ok {
			pl.SetSource(pinned)
			st.Pinned = have.Source.Revision
		}
	}
	return st, nil
}

// Outcome is what checking the lock came to.
type Outcome struct {
	// Status: written, updated, unchanged, matches, differs, unchecked.
	Status  string
	Changes []lockfile.Change
	// Detail says why a lock went unchecked.
	Detail string
	// Mismatch is set when the lock differs from what resolves now.
	Mismatch *lockfile.MismatchError
}

// Check resolves the plan's inputs and compares them with the lock, or
// writes the lock. A --locked run gets an error for a missing or
// different lock (MissingError, *lockfile.MismatchError); otherwise
// problems are reported in the outcome and the run goes on.
func (st *State) Check(ctx context.Context, eng *engine.Engine, pl *plan.Plan, cacheRoot, version string) (Outcome, error) {
	if st.Locked && st.Have == nil {
		return Outcome{Status: "missing"}, &MissingError{Path: st.Path, Recipe: st.Recipe}
	}
	now, err := Resolve(ctx, eng, pl, cacheRoot, version, st.Update)
	if err != nil {
		if engine.IsInterrupted(err) {
			return Outcome{}, err
		}
		if st.Locked {
			// Not a mismatch (exit 4): a tool or the source is missing.
			return Outcome{}, fmt.Errorf("--locked: cannot check %s: %w", st.Path, err)
		}
		// The run reports the same problem where it happens; a lock is
		// written only from a complete resolution.
		return Outcome{Status: "unchecked", Detail: err.Error()}, nil
	}
	if st.Partial && st.Have == nil {
		return Outcome{Status: "unchecked", Detail: "a run with --target does not write the lock; `edgepipe lock` resolves the whole recipe"}, nil
	}
	if st.Have == nil || st.Update {
		out := Outcome{Status: "written"}
		if st.Have != nil {
			out.Changes, out.Status = lockfile.Diff(st.Have, now), "updated"
			if len(out.Changes) == 0 {
				out.Status = "unchanged"
			}
		}
		if out.Status != "unchanged" {
			if err := lockfile.Write(st.Path, now); err != nil {
				if st.Update {
					return Outcome{}, err
				}
				// A run that was not asked for a lock still runs.
				return Outcome{Status: "unchecked", Detail: err.Error()}, nil
			}
		}
		return out, nil
	}
	if !st.Locked && st.Have.Platform != now.Platform {
		// Every native digest would differ: say so once, not six times.
		return Outcome{Status: "unchecked", Detail: fmt.Sprintf("it was made on %s, this is %s (a lock holds one platform's tool builds)", st.Have.Platform, now.Platform)}, nil
	}
	have := st.Have
	if st.Partial {
		// Only the locked entries this selection uses are compared.
		have = lockfile.Subset(have, now)
	}
	changes := lockfile.Diff(have, now)
	if len(changes) == 0 {
		return Outcome{Status: "matches"}, nil
	}
	mismatch := &lockfile.MismatchError{Path: st.Path, Recipe: st.Recipe, Changes: changes}
	out := Outcome{Status: "differs", Changes: changes, Mismatch: mismatch}
	if st.Locked {
		return out, mismatch
	}
	return out, nil
}
