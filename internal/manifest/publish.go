package manifest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Publishing protocol
//
// A target's folder FINAL = PARENT/NAME is only ever replaced by a rename, so
// a reader sees the old complete folder or the new complete one. Siblings in
// PARENT carry the in-flight state:
//
//	.NAME.tmp-PID-RAND  a staging folder of process PID (Stage). After an
//	                    exchange (below) it holds the folder being replaced.
//	.NAME.old-PID-RAND  the previous FINAL, renamed aside; only exists while
//	                    PID holds the parent's lock (two-rename fallback).
//
// Publish(staging, FINAL):
//  1. verify staging against its manifest, fsyncing every file and folder;
//  2. take an exclusive flock on PARENT (serializes publishers and cleaners;
//     the kernel drops it when the holder dies);
//  3. clean NAME's stale siblings exactly as CleanStale does (which may
//     restore a FINAL from an .old- sibling);
//  4. if FINAL is absent: rename staging -> FINAL;
//     else where the OS can swap two folders atomically (Linux
//     renameat2(RENAME_EXCHANGE), macOS renamex_np(RENAME_SWAP)): swap them,
//     so FINAL is never absent, and the staging name now holds the old folder;
//     else: rename FINAL -> .NAME.old-PID-RAND, then staging -> FINAL;
//  5. fsync PARENT, remove the old folder, release the lock.
//
// A kill at any point leaves one of these, and the next Publish or
// CleanStale on PARENT repairs it:
//   - before 4: FINAL is the old folder; .NAME.tmp-PID-* (PID dead) is removed.
//   - after a swap: FINAL is the new folder; the .tmp- sibling holding the old
//     one (PID dead) is removed.
//   - between the two renames of the fallback: FINAL is absent and
//     .NAME.old-* holds the old complete folder. The repair renames it back to
//     FINAL (the interrupted publish never happened; nothing half-written is
//     ever promoted), and removes the staging folder. A Publish that finds
//     this state therefore restores the old folder and then replaces it.
//   - after the second rename: FINAL is the new folder; .old- is removed.
//
// .tmp- siblings are removed only when their PID is dead (signal 0 says no
// such process), since a live process may still be filling one; a reused PID
// just postpones the removal. PIDs are only meaningful on one host: do not
// publish into one folder from several machines at once. .old- siblings are
// judged under the lock, where any that exist are leftovers whatever their PID.

// crashPoint lets tests kill the process at a named step of Publish.
var crashPoint func(point string)

func reached(point string) {
	if crashPoint != nil {
		crashPoint(point)
	}
}

// errSwapUnsupported is returned by swapDirs where the OS or file system
// cannot exchange two folders atomically.
var errSwapUnsupported = errors.New("atomic folder exchange is not supported here")

// swap exchanges two folders atomically; a variable so tests can force the
// two-rename fallback.
var swap = swapDirs

var siblingPattern = regexp.MustCompile(`^\.(.+)\.(tmp|old)-([0-9]+)-([0-9a-f]{16})$`)

// sibling is a parsed in-flight sibling name.
type sibling struct {
	path  string
	name  string // the target folder it belongs to
	state string // "tmp" or "old"
	pid   int
}

func parseSibling(parent, base string) (sibling, bool) {
	m := siblingPattern.FindStringSubmatch(base)
	if m == nil {
		return sibling{}, false
	}
	pid, err := strconv.Atoi(m[3])
	if err != nil {
		return sibling{}, false
	}
	return sibling{path: filepath.Join(parent, base), name: m[1], state: m[2], pid: pid}, true
}

func newSibling(parent, name, state string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return filepath.Join(parent, fmt.Sprintf(".%s.%s-%d-%s", name, state, os.Getpid(), hex.EncodeToString(b[:])))
}

// splitFinal returns final's parent and name, refusing names the protocol
// cannot tell apart from its own siblings.
func splitFinal(final string) (parent, name string, err error) {
	clean := filepath.Clean(final)
	name = filepath.Base(clean)
	if name == "." || name == ".." || name == string(filepath.Separator) || strings.HasPrefix(name, ".") {
		return "", "", fmt.Errorf("cannot publish to %q: the artifact folder needs a name that does not start with a dot", final)
	}
	return filepath.Dir(clean), name, nil
}

// Stage creates an empty staging folder for final, as a sibling of it (so on
// the same file system, which makes the final rename atomic), creating
// final's parent if needed. Fill it with the model files, logs/ and last the
// manifest (Write), then call Publish; to abandon it, os.RemoveAll it.
func Stage(final string) (staging string, err error) {
	parent, name, err := splitFinal(final)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("stage %s: %w", final, err)
	}
	for {
		staging = newSibling(parent, name, "tmp")
		err := os.Mkdir(staging, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("stage %s: %w", final, err)
		}
		return staging, nil
	}
}

// Publish makes the staged folder the artifact folder final, replacing any
// previous one atomically; see the protocol above. The staged folder must
// match its manifest.
func Publish(staging, final string) error {
	return PublishContext(context.Background(), staging, final)
}

// PublishContext is Publish with a context. Cancelling it stops the
// verification and the wait for the lock; once the first rename is done the
// publish completes regardless, since stopping then would only leave repair
// work behind.
func PublishContext(ctx context.Context, staging, final string) error {
	parent, name, err := splitFinal(final)
	if err != nil {
		return err
	}
	final = filepath.Join(parent, name)
	if err := checkStaging(staging, parent, name); err != nil {
		return err
	}
	staging = filepath.Clean(staging)

	m, err := Read(staging)
	if err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	problems, err := verify(ctx, staging, m, true)
	if err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("publish %s: the staged folder %s does not match its manifest (write the manifest after the last file): %s", final, staging, summarize(problems))
	}
	if err := syncFile(filepath.Join(staging, FileName)); err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	reached("verified")

	unlock, err := lockDir(ctx, parent)
	if err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	defer unlock()
	reached("locked")
	if err := cleanLocked(parent, name); err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}

	info, err := os.Lstat(final)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Rename(staging, final); err != nil {
			return fmt.Errorf("publish %s: %w", final, err)
		}
		reached("renamed")
		return syncPublished(parent, final, "")
	case err != nil:
		return fmt.Errorf("publish %s: %w", final, err)
	case !info.IsDir():
		return fmt.Errorf("publish %s: it exists and is not a folder; move it away and run again", final)
	}
	if err := CheckReplaceable(final, m.Recipe.Name, m.Target.Name); err != nil {
		return err
	}

	err = swap(staging, final)
	if err == nil {
		// The staging name now holds the previous folder.
		reached("swapped")
		return syncPublished(parent, final, staging)
	}
	if !errors.Is(err, errSwapUnsupported) {
		return fmt.Errorf("publish %s: %w", final, err)
	}

	old := newSibling(parent, name, "old")
	if err := os.Rename(final, old); err != nil {
		return fmt.Errorf("publish %s: move the previous folder aside: %w", final, err)
	}
	reached("aside")
	if err := os.Rename(staging, final); err != nil {
		if rerr := os.Rename(old, final); rerr != nil {
			return fmt.Errorf("publish %s: %w; the previous folder is at %s and could not be moved back (%v): rename it to %s", final, err, old, rerr, final)
		}
		return fmt.Errorf("publish %s: %w", final, err)
	}
	reached("renamed")
	return syncPublished(parent, final, old)
}

// ReplaceError is a folder where an artifact would go that is not an
// earlier publish of the same recipe and target: publishing never
// deletes what it did not make.
type ReplaceError struct {
	Dir, Why string
}

func (e *ReplaceError) Error() string {
	return fmt.Sprintf("%s %s, so publishing would replace it: nothing was changed; move it away, or publish elsewhere with --out DIR", e.Dir, e.Why)
}

// CheckReplaceable allows replacing final only when it does not exist, is
// empty, or is an edgepipe artifact of this recipe and target. Publish
// checks it under the folder's lock; a publisher checks it first too, so a
// refusal comes before the model is copied.
func CheckReplaceable(final, recipe, target string) error {
	info, err := os.Lstat(final)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("publish %s: %w", final, err)
	case !info.IsDir():
		return &ReplaceError{Dir: final, Why: "exists and is not a folder"}
	}
	ents, err := os.ReadDir(final)
	if err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	if len(ents) == 0 {
		return nil
	}
	old, err := Read(final)
	if err != nil {
		return &ReplaceError{Dir: final, Why: "exists and is not an edgepipe artifact folder (" + err.Error() + ")"}
	}
	if old.Recipe.Name != recipe || old.Target.Name != target {
		return &ReplaceError{Dir: final, Why: fmt.Sprintf("holds the artifact of recipe %q target %q, not of recipe %q target %q",
			old.Recipe.Name, old.Target.Name, recipe, target)}
	}
	return nil
}

// syncPublished makes the rename durable and removes the replaced folder.
func syncPublished(parent, final, replaced string) error {
	if err := syncDir(parent); err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	reached("synced")
	if replaced != "" {
		// The publish has happened; a leftover is removed by the next
		// Publish or CleanStale, so it is not worth failing over.
		_ = os.RemoveAll(replaced)
	}
	return nil
}

func checkStaging(staging, parent, name string) error {
	sp, err := filepath.Abs(filepath.Dir(filepath.Clean(staging)))
	if err != nil {
		return err
	}
	fp, err := filepath.Abs(parent)
	if err != nil {
		return err
	}
	s, ok := parseSibling(sp, filepath.Base(filepath.Clean(staging)))
	if sp != fp || !ok || s.state != "tmp" || s.name != name {
		return fmt.Errorf("publish %s: %s is not a staging folder for it; create one with manifest.Stage", filepath.Join(parent, name), staging)
	}
	return nil
}

func summarize(ps []Problem) string {
	const show = 5
	var parts []string
	for i, p := range ps {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(ps)-show))
			break
		}
		parts = append(parts, p.String())
	}
	return strings.Join(parts, "; ")
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// CleanStale repairs what killed publishers left in parent (see the
// protocol above): for every artifact folder with leftovers, it restores the
// folder from its .old- sibling when the folder itself is absent, removes the
// other .old- siblings, and removes .tmp- siblings whose process is dead.
// A parent that does not exist is clean.
func CleanStale(parent string) error {
	names, err := staleNames(parent)
	if err != nil || len(names) == 0 {
		return err
	}
	unlock, err := lockDir(context.Background(), parent)
	if err != nil {
		return fmt.Errorf("clean %s: %w", parent, err)
	}
	defer unlock()
	var errs []error
	for _, name := range names {
		errs = append(errs, cleanLocked(parent, name))
	}
	return errors.Join(errs...)
}

func staleNames(parent string) ([]string, error) {
	des, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("clean %s: %w", parent, err)
	}
	seen := map[string]bool{}
	var names []string
	for _, de := range des {
		if s, ok := parseSibling(parent, de.Name()); ok && !seen[s.name] {
			seen[s.name] = true
			names = append(names, s.name)
		}
	}
	return names, nil
}

// cleanLocked repairs name's leftovers; the caller holds parent's lock.
func cleanLocked(parent, name string) error {
	des, err := os.ReadDir(parent)
	if err != nil {
		return fmt.Errorf("clean %s: %w", parent, err)
	}
	var olds, tmps []sibling
	for _, de := range des {
		s, ok := parseSibling(parent, de.Name())
		if !ok || s.name != name {
			continue
		}
		if s.state == "old" {
			olds = append(olds, s)
		} else {
			tmps = append(tmps, s)
		}
	}
	if len(olds) == 0 && len(tmps) == 0 {
		return nil
	}
	final := filepath.Join(parent, name)
	var errs []error
	changed := false
	if len(olds) > 0 {
		_, err := os.Lstat(final)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Only one publisher at a time can have moved a folder aside,
			// and each restores before it publishes, so there is one.
			sort.Slice(olds, func(i, j int) bool { return olds[i].path < olds[j].path })
			if err := os.Rename(olds[0].path, final); err != nil {
				return fmt.Errorf("clean %s: restore %s from %s: %w", parent, final, olds[0].path, err)
			}
			olds = olds[1:]
			changed = true
		case err != nil:
			return fmt.Errorf("clean %s: %w", parent, err)
		}
	}
	for _, s := range olds {
		errs = append(errs, os.RemoveAll(s.path))
		changed = true
	}
	for _, s := range tmps {
		if s.pid == os.Getpid() || pidAlive(s.pid) {
			continue
		}
		errs = append(errs, os.RemoveAll(s.path))
		changed = true
	}
	if changed {
		errs = append(errs, syncDir(parent))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean %s: %w", parent, err)
	}
	return nil
}
