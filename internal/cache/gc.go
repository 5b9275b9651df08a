package cache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// staleAge is how long a temp dir or temp file may sit unchanged before GC
// treats it as abandoned even if a process with its pid exists (pids get
// reused). A step still building it holds its key's lock, which GC respects.
const staleAge = time.Hour

// GC removes the entries that keep rejects (nil keep rejects none), with
// their objects, and the debris of interrupted runs: objects without an
// entry, temp dirs whose process is gone or that are older than an hour,
// half-written records, and lock files of keys with nothing cached. It
// takes each key's lock before removing anything of it and skips keys that
// are busy. removed counts entries, orphaned objects and temp dirs removed;
// freed is the bytes of their files.
func (c *Cache) GC(ctx context.Context, keep func(Entry) bool) (removed int, freed int64, err error) {
	type pass func(ctx context.Context, keep func(Entry) bool) (int, int64, error)
	for _, p := range []pass{c.gcEntries, c.gcOrphanObjects, c.gcTempDirs, c.gcTempFiles, c.gcLockFiles} {
		n, b, err := p(ctx, keep)
		removed += n
		freed += b
		if err != nil {
			return removed, freed, fmt.Errorf("cache gc: %w", err)
		}
	}
	return removed, freed, nil
}

// GCDryRun is what GC would remove of the entries keep rejects, without
// removing anything or taking locks: the entries and the bytes of their
// objects.
func (c *Cache) GCDryRun(ctx context.Context, keep func(Entry) bool) (doomed []Entry, bytes int64, err error) {
	ents, err := c.List()
	if err != nil {
		return nil, 0, err
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return doomed, bytes, err
		}
		if keep != nil && !keep(e) {
			doomed = append(doomed, e)
			bytes += dirSize(e.Dir)
		}
	}
	return doomed, bytes, nil
}

// CleanTemp removes what killed runs left in tmp/ (builds and scratch dirs
// no process holds, half-written records), as GC does, but touches no
// entry: a run calls it on start, so debris does not wait for `cache gc`.
func (c *Cache) CleanTemp(ctx context.Context) (removed int, freed int64, err error) {
	n, b, err := c.gcTempDirs(ctx, nil)
	if err != nil {
		return n, b, err
	}
	_, _, err = c.gcTempFiles(ctx, nil)
	return n, b, err
}

func (c *Cache) gcEntries(ctx context.Context, keep func(Entry) bool) (int, int64, error) {
	kept := func(e *Entry) bool { return e != nil && (keep == nil || keep(*e)) }
	return c.sweep(ctx, entriesDir,
		func(name string) (string, bool) { return strings.CutSuffix(name, ".json") },
		func(key string) (bool, error) {
			// An unreadable record counts as no entry: it is removed.
			e, _, err := c.readEntry(key)
			return err == nil && !kept(e), err
		},
		c.removeKey)
}

func (c *Cache) gcOrphanObjects(ctx context.Context, _ func(Entry) bool) (int, int64, error) {
	return c.sweep(ctx, objectsDir,
		func(name string) (string, bool) { return name, true },
		func(key string) (bool, error) {
			e, _, err := c.readEntry(key)
			return err == nil && e == nil, err
		},
		c.removeObject)
}

// sweep removes, for each key named in dir, what doomed says must go: it
// asks once without the key's lock and again holding it (the key may
// have changed while it waited), skips keys another process holds, and
// removes the key's lock file with it.
func (c *Cache) sweep(ctx context.Context, dir string, keyOf func(name string) (string, bool),
	doomed func(key string) (bool, error), remove func(key string) (int64, error)) (int, int64, error) {
	names, err := os.ReadDir(filepath.Join(c.root, dir))
	if err != nil {
		return 0, 0, err
	}
	removed, freed := 0, int64(0)
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return removed, freed, err
		}
		key, ok := keyOf(n.Name())
		if !ok || checkKey(key) != nil {
			continue
		}
		if d, err := doomed(key); err != nil || !d {
			continue
		}
		b, err := c.withFreeKey(key, func() (bool, int64, error) {
			if d, err := doomed(key); err != nil || !d {
				return false, 0, err // changed while we waited
			}
			b, err := remove(key)
			c.removeLockFile(key)
			return true, b, err
		})
		if err != nil {
			return removed, freed, err
		}
		if b >= 0 {
			removed++
			freed += b
		}
	}
	return removed, freed, nil
}

// withFreeKey runs fn holding key's lock, or does nothing (returning -1)
// if another holder has it. fn reports whether it removed something.
func (c *Cache) withFreeKey(key string, fn func() (bool, int64, error)) (int64, error) {
	release, ok, err := c.TryLock(key)
	if err != nil || !ok {
		return -1, err
	}
	defer release()
	did, n, err := fn()
	if !did {
		return -1, err
	}
	return n, err
}

func (c *Cache) gcTempDirs(ctx context.Context, _ func(Entry) bool) (int, int64, error) {
	dir := filepath.Join(c.root, tmpDir)
	names, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	removed, freed := 0, int64(0)
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return removed, freed, err
		}
		p := filepath.Join(dir, n.Name())
		if dirInUse(p) {
			continue // a step is building in it, however old it looks
		}
		key, pid, ok := parseTempName(n.Name())
		if !ok {
			// Not ours to judge by owner; only its age says it is abandoned.
			if old(p) {
				b := dirSize(p)
				if err := os.RemoveAll(p); err != nil {
					return removed, freed, err
				}
				removed++
				freed += b
			}
			continue
		}
		if !processGone(pid) && !old(p) {
			continue
		}
		b, err := c.withFreeKey(key, func() (bool, int64, error) {
			b := dirSize(p)
			if err := os.RemoveAll(p); err != nil {
				return false, 0, err
			}
			return true, b, nil
		})
		if err != nil {
			return removed, freed, err
		}
		if b >= 0 {
			removed++
			freed += b
		}
	}
	return removed, freed, nil
}

func old(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && time.Since(fi.ModTime()) > staleAge
}

// gcTempFiles removes half-written records and memos: ".<name>.tmp-<pid>-*"
// files in entries/ and the root left by a writer that died.
func (c *Cache) gcTempFiles(ctx context.Context, _ func(Entry) bool) (int, int64, error) {
	for _, dir := range []string{filepath.Join(c.root, entriesDir), c.root} {
		names, err := os.ReadDir(dir)
		if err != nil {
			return 0, 0, err
		}
		for _, n := range names {
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
			_, rest, ok := strings.Cut(n.Name(), ".tmp-")
			if !ok || !strings.HasPrefix(n.Name(), ".") || !n.Type().IsRegular() {
				continue
			}
			pidText, _, _ := strings.Cut(rest, "-")
			p := filepath.Join(dir, n.Name())
			pid, err := strconv.Atoi(pidText)
			if err == nil && pid > 0 && !processGone(pid) && !old(p) {
				continue
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, 0, err
			}
		}
	}
	return 0, 0, nil
}

// gcLockFiles removes lock files of keys that have neither an entry nor an
// object (steps that failed or were never committed).
func (c *Cache) gcLockFiles(ctx context.Context, _ func(Entry) bool) (int, int64, error) {
	names, err := os.ReadDir(filepath.Join(c.root, locksDir))
	if err != nil {
		return 0, 0, err
	}
	unused := func(key string) bool {
		_, errE := os.Lstat(c.entryPath(key))
		_, errO := os.Lstat(c.ObjectDir(key))
		return errors.Is(errE, fs.ErrNotExist) && errors.Is(errO, fs.ErrNotExist)
	}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		key, ok := strings.CutSuffix(n.Name(), ".lock")
		if !ok || checkKey(key) != nil || !unused(key) {
			continue
		}
		if _, err := c.withFreeKey(key, func() (bool, int64, error) {
			if unused(key) {
				c.removeLockFile(key)
			}
			return false, 0, nil
		}); err != nil {
			return 0, 0, err
		}
	}
	return 0, 0, nil
}
