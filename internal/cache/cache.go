// Package cache keeps completed step outputs under content-derived keys.
//
// An output is built in a temp dir, hashed, made durable and renamed into
// objects/<key>; only then is entries/<key>.json written (atomically). So an
// entry exists only for a complete output, and a run killed at any moment
// leaves at most debris that no lookup trusts and GC removes.
//
// Layout under the root:
//
//	objects/<key>/      a committed step's output dir (files read-only)
//	entries/<key>.json  its record (Entry)
//	tmp/<key>.<pid>.*   outputs being built
//	locks/<key>.lock    per-key inter-process locks
//	memo.json           digest memo of input files (see digest.Memo)
//
// The intended use for one step:
//
//	if e, ok, _ := c.Lookup(key); ok { use e }      // cheap, no lock
//	release, _ := c.Lock(ctx, key)                   // waits for another process building key
//	defer release()
//	if e, ok, _ := c.Lookup(key); ok { use e }      // it may have finished meanwhile
//	tmp, _ := c.TempDir(key); run the step into tmp
//	e, err := c.Commit(key, tmp, Entry{...})         // or c.Abort(tmp) on failure
package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/digest"
)

// Entry is the record of one committed output.
type Entry struct {
	Key    string `json:"key"`
	Kind   string `json:"kind"`
	StepID string `json:"step_id"`
	// Tree is the digest of the output dir, filled in by Commit.
	Tree     digest.TreeDigest `json:"tree"`
	Created  time.Time         `json:"created"`
	Duration time.Duration     `json:"duration_ns"`
	// Tools maps each tool the step ran to its version.
	Tools map[string]string `json:"tools,omitempty"`
	Meta  map[string]any    `json:"meta,omitempty"`
	// Check is the sha256 of the record with Check empty: a record edited
	// or damaged since Commit wrote it is not trusted.
	Check string `json:"check"`

	// Dir is the output dir, objects/<key> under the cache root.
	Dir string `json:"-"`
	// LastUsed is when a run last found the entry (a cache hit): the
	// record file's modification time, which Lookup moves forward. Its
	// bytes stay as Commit wrote them, so the record's check and the
	// reread Lookup compares are not disturbed by a concurrent hit.
	LastUsed time.Time `json:"-"`
}

// Cache is a cache rooted at one directory. Any number of goroutines and
// processes may share it.
type Cache struct {
	root   string
	memo   *digest.Memo
	verify atomic.Bool
	// heldDirs maps the temp and scratch dirs this process is building in
	// to the open file that holds their lock (holdDir).
	heldDirs sync.Map
}

const (
	objectsDir = "objects"
	entriesDir = "entries"
	tmpDir     = "tmp"
	locksDir   = "locks"
	memoFile   = "memo.json"
)

// Open opens the cache at root, creating its directories if needed.
func Open(root string) (*Cache, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open cache %s: %w", root, err)
	}
	for _, d := range []string{objectsDir, entriesDir, tmpDir, locksDir} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o755); err != nil {
			return nil, fmt.Errorf("open cache %s: %w; check that the directory is writable or pick another cache dir", root, err)
		}
	}
	memo, err := digest.OpenMemo(filepath.Join(abs, memoFile))
	if err != nil {
		return nil, fmt.Errorf("open cache %s: %w", root, err)
	}
	return &Cache{root: abs, memo: memo}, nil
}

// Root is the cache's absolute root directory.
func (c *Cache) Root() string { return c.root }

// Memo is the cache's digest memo for input files, stored in memo.json;
// call its Save at the end of a run.
func (c *Cache) Memo() *digest.Memo { return c.memo }

// SetVerify makes Lookup rehash every file of an object instead of only
// checking sizes, and makes the digest memo rehash inputs too. An object
// whose content no longer matches its record is then a miss, and it is
// removed if no other process holds its key.
func (c *Cache) SetVerify(v bool) {
	c.verify.Store(v)
	c.memo.SetVerify(v)
}

// ObjectDir is where the output for key lives once committed.
func (c *Cache) ObjectDir(key string) string { return filepath.Join(c.root, objectsDir, key) }

func (c *Cache) entryPath(key string) string {
	return filepath.Join(c.root, entriesDir, key+".json")
}

// checkKey keeps keys to names that are safe as file names and that the tmp
// dir naming (<key>.<pid>.<random>) can be parsed back from.
func checkKey(key string) error {
	if key == "" || len(key) > 128 {
		return fmt.Errorf("invalid cache key %q: want 1 to 128 characters", key)
	}
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("invalid cache key %q: only letters, digits, '-' and '_' are allowed", key)
		}
	}
	return nil
}

// Lookup returns the entry for key if the cache holds a complete output for
// it: the record and the object dir must both exist, and every recorded
// file must be there with its recorded size (or, under SetVerify(true),
// its recorded content). An object damaged in place (a recorded file
// missing, of another size, or swapped for a link or anything else that
// Commit never leaves there) is evicted and returned as a *CorruptError:
// a miss the caller reports, since the step runs again.
func (c *Cache) Lookup(key string) (*Entry, bool, error) {
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	e, raw, err := c.readEntry(key)
	if err != nil || e == nil {
		return nil, false, err
	}
	if c.verify.Load() {
		td, err := (*digest.Memo)(nil).Tree(e.Dir)
		if err != nil || td.SHA256 != e.Tree.SHA256 {
			c.discardUnlessBusy(key, raw)
			return nil, false, nil
		}
	} else if ok, damage, err := sizesMatch(e); err != nil || !ok {
		if damage != nil {
			// Only if the record is still the one checked: a record
			// replaced meanwhile (a forced rerun) is a plain miss.
			if _, again, rerr := c.readEntry(key); rerr == nil && string(again) == string(raw) {
				c.discardUnlessBusy(key, raw)
				return nil, false, damage
			}
		}
		return nil, false, err
	}
	// Another process may have replaced the output (a forced rerun) while
	// we looked at it; the record read before must still be the record now,
	// or the object we checked may not be the one it describes.
	if _, again, err := c.readEntry(key); err != nil || string(again) != string(raw) {
		return nil, false, err
	}
	c.touch(e)
	return e, true, nil
}

// touch records a hit as the record file's modification time (at most
// once a minute per entry: a run of many hits writes little).
func (c *Cache) touch(e *Entry) {
	now := time.Now()
	if now.Sub(e.LastUsed) < time.Minute {
		return
	}
	if os.Chtimes(c.entryPath(e.Key), now, now) == nil {
		e.LastUsed = now
	}
}

// readEntry returns the record and its bytes, or nil without error for a
// missing or unreadable record: either way there is nothing to trust, and
// Commit will replace it.
func (c *Cache) readEntry(key string) (*Entry, []byte, error) {
	data, err := boundedfile.ReadNoFollow(c.entryPath(key), boundedfile.ResultLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read cache entry %s: %w", key, err)
	}
	var e Entry
	if json.Unmarshal(data, &e) != nil || e.Key != key || e.Check == "" || e.Check != recordCheck(e) {
		return nil, data, nil
	}
	for _, f := range e.Tree.Files {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) {
			return nil, data, nil
		}
	}
	e.Dir = c.ObjectDir(key)
	e.LastUsed = e.Created
	if fi, err := os.Lstat(c.entryPath(key)); err == nil {
		e.LastUsed = fi.ModTime() // Commit wrote it, or a hit since touched it
	}
	return &e, data, nil
}

// sizesMatch checks an entry's object by its files' stats. A missing
// object folder is a plain miss; a file in it that is not what the record
// says is damage, described by a *CorruptError.
func sizesMatch(e *Entry) (bool, *CorruptError, error) {
	fi, err := os.Stat(e.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("check cache object %s: %w", e.Key, err)
	}
	if !fi.IsDir() {
		return false, nil, nil
	}
	for _, f := range e.Tree.Files {
		// Lstat: objects hold only regular files (Commit turns links into
		// files), so a link found here was put there after the commit.
		fi, err := os.Lstat(filepath.Join(e.Dir, filepath.FromSlash(f.Path)))
		damage := func(problem string) *CorruptError {
			return &CorruptError{Key: e.Key, StepID: e.StepID, Path: f.Path, Problem: problem}
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return false, damage("is missing"), nil
		case err != nil:
			return false, nil, fmt.Errorf("check cache object %s: %w", e.Key, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return false, damage("is a link (a cache holds only the files its steps wrote)"), nil
		case !fi.Mode().IsRegular():
			return false, damage("is not a regular file"), nil
		case fi.Size() != f.Size:
			return false, damage(fmt.Sprintf("has %d bytes, the record says %d", fi.Size(), f.Size)), nil
		}
	}
	return true, nil, nil
}

// discardUnlessBusy removes a bad entry and its object. If the key is
// locked, its holder may be about to replace them (Commit does that) or may
// be reading a fresh object, so they are left to it; so is a record that
// changed since it was found bad.
func (c *Cache) discardUnlessBusy(key string, bad []byte) {
	release, ok, err := c.TryLock(key)
	if err != nil || !ok {
		return
	}
	defer release()
	if _, now, err := c.readEntry(key); err == nil && string(now) == string(bad) {
		c.removeKey(key)
	}
}

// removeKey removes key's entry, then its object; the caller holds the
// key's lock. It returns the bytes freed.
func (c *Cache) removeKey(key string) (int64, error) {
	if err := os.Remove(c.entryPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("remove cache entry %s: %w", key, err)
	}
	if err := atomicfile.SyncDir(filepath.Join(c.root, entriesDir)); err != nil {
		return 0, fmt.Errorf("remove cache entry %s: %w", key, err)
	}
	return c.removeObject(key)
}

// removeObject moves the object out of objects/ in one rename, so that a
// kill halfway through deleting it cannot leave a partial object in place,
// then deletes it.
func (c *Cache) removeObject(key string) (int64, error) {
	obj := c.ObjectDir(key)
	if _, err := os.Lstat(obj); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	trash, err := os.MkdirTemp(filepath.Join(c.root, tmpDir), fmt.Sprintf("%s.%d.", key, os.Getpid()))
	if err != nil {
		return 0, fmt.Errorf("remove cache object %s: %w", key, err)
	}
	if err := os.Rename(obj, filepath.Join(trash, "object")); err != nil {
		os.Remove(trash)
		return 0, fmt.Errorf("remove cache object %s: %w", key, err)
	}
	size := dirSize(trash)
	if err := os.RemoveAll(trash); err != nil {
		return size, fmt.Errorf("remove cache object %s: %w", key, err)
	}
	return size, nil
}

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// TempDir returns a new empty dir in which to build the output for key. It
// lies on the same filesystem as objects/, so Commit's rename is atomic.
// Use it while holding key's lock: GC removes temp dirs whose key is free
// and whose process is gone or that are over an hour old.
func (c *Cache) TempDir(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return c.newDir(key, "")
}

// ScratchDir returns a new empty working dir for a step building key's
// output (tools' temporary files, a clone of an input): GC leaves it alone
// while this process lives. Call release when the step is done; it removes
// the dir.
func (c *Cache) ScratchDir(key string) (dir string, release func(), err error) {
	if err := checkKey(key); err != nil {
		return "", nil, err
	}
	dir, err = c.newDir(key, "s")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { c.releaseDir(dir); os.RemoveAll(dir) }, nil
}

func (c *Cache) newDir(key, prefix string) (string, error) {
	dir, err := os.MkdirTemp(filepath.Join(c.root, tmpDir), fmt.Sprintf("%s.%d.%s", key, os.Getpid(), prefix))
	if err != nil {
		return "", fmt.Errorf("create temp dir for %s: %w", key, err)
	}
	if err := c.holdDir(dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// Abort removes a temp dir from TempDir whose step failed.
func (c *Cache) Abort(tmp string) {
	if c.isTempDir(tmp, "") {
		c.releaseDir(tmp)
		os.RemoveAll(tmp)
	}
}

func (c *Cache) isTempDir(dir, key string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil || filepath.Dir(abs) != filepath.Join(c.root, tmpDir) {
		return false
	}
	tk, _, ok := parseTempName(filepath.Base(abs))
	return ok && (key == "" || tk == key)
}

// parseTempName splits "<key>.<pid>.<random>".
func parseTempName(name string) (key string, pid int, ok bool) {
	parts := strings.Split(name, ".")
	if len(parts) != 3 || checkKey(parts[0]) != nil {
		return "", 0, false
	}
	if _, err := fmt.Sscanf(parts[1], "%d", &pid); err != nil || pid <= 0 {
		return "", 0, false
	}
	return parts[0], pid, true
}

// Commit makes the output built in tmp (from TempDir(key)) the cached
// output for key, and returns its entry. rec supplies the descriptive
// fields; Commit fills in Key, Tree and, if zero, Created. Call it holding
// key's lock. Files are made read-only so that a later step cannot change
// a cached output in place.
func (c *Cache) Commit(key, tmp string, rec Entry) (*Entry, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if !c.isTempDir(tmp, key) {
		return nil, fmt.Errorf("commit %s: %s is not a temp dir of this cache for this key; get one from TempDir", key, tmp)
	}
	tmp, _ = filepath.Abs(tmp)
	defer c.releaseDir(tmp)
	// The disk writes the outputs while the CPU hashes them: the fsyncs
	// below then wait for what is left instead of for all of it.
	writeback := startTreeWriteback(tmp)
	td, err := (*digest.Memo)(nil).Tree(tmp)
	writeback()
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", key, err)
	}
	if err := makeDurableReadOnly(tmp); err != nil {
		return nil, fmt.Errorf("commit %s: %w", key, err)
	}
	rec.Key = key
	rec.Tree = td
	if rec.Created.IsZero() {
		rec.Created = time.Now().UTC()
	}
	rec.Check = recordCheck(rec)
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("commit %s: encode entry: %w", key, err)
	}

	// Drop any older entry first, so that no moment has an entry beside an
	// object that is not its own; then any object left by an older commit
	// or by one that was killed before writing its entry.
	if _, err := c.removeKey(key); err != nil {
		return nil, fmt.Errorf("commit %s: %w", key, err)
	}
	obj := c.ObjectDir(key)
	if err := os.Rename(tmp, obj); err != nil {
		return nil, fmt.Errorf("commit %s: %w", key, err)
	}
	if err := atomicfile.SyncDir(filepath.Join(c.root, objectsDir)); err != nil {
		return nil, fmt.Errorf("commit %s: %w", key, err)
	}
	if err := atomicfile.Write(c.entryPath(key), data, 0o644); err != nil {
		return nil, fmt.Errorf("commit %s: write entry: %w", key, err)
	}
	rec.Dir = obj
	return &rec, nil
}

// startTreeWriteback starts the kernel writing every regular file under dir
// to disk, in the background; the result waits until every request is
// made.
func startTreeWriteback(dir string) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				atomicfile.StartWriteback(p)
			}
			return nil
		})
	}()
	return func() { <-done }
}

// makeDurableReadOnly fsyncs every file and directory under dir and clears
// the files' write bits, so that the rename that publishes dir can never
// reach the disk before its content.
func makeDurableReadOnly(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, p)
		case d.Type()&fs.ModeSymlink != 0:
			// The dir is about to move: a link by absolute path into it
			// would dangle once it has.
			target, err := os.Readlink(p)
			if err == nil && filepath.IsAbs(target) {
				return fmt.Errorf("symlink %s points to the absolute path %s; make it relative", p, target)
			}
			// A committed object holds only regular files, so a link found
			// in one later was not made by its step: the link becomes a
			// hard link to its target (Tree checked it stays inside).
			if err == nil {
				if err := os.Remove(p); err != nil {
					return err
				}
				if err := os.Link(filepath.Join(filepath.Dir(p), target), p); err != nil {
					return fmt.Errorf("replace the symlink %s by its target: %w", p, err)
				}
				return syncFile(p)
			}
		case d.Type().IsRegular():
			return syncFile(p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := atomicfile.SyncDir(d); err != nil {
			return fmt.Errorf("sync %s: %w", d, err)
		}
	}
	return nil
}

// List returns every entry whose record is readable, oldest first. It
// does not check the objects; Lookup does.
func (c *Cache) List() ([]Entry, error) {
	names, err := os.ReadDir(filepath.Join(c.root, entriesDir))
	if err != nil {
		return nil, fmt.Errorf("list cache: %w", err)
	}
	var out []Entry
	for _, n := range names {
		key, ok := strings.CutSuffix(n.Name(), ".json")
		if !ok || checkKey(key) != nil {
			continue
		}
		e, _, err := c.readEntry(key)
		if err != nil {
			return nil, fmt.Errorf("list cache: %w", err)
		}
		if e != nil {
			out = append(out, *e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out, nil
}

// syncFile clears a file's write bits and fsyncs it.
func syncFile(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil {
		err = f.Chmod(fi.Mode().Perm() &^ 0o222)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	return nil
}

// recordCheck is the sha256 of an entry's record with its Check empty.
func recordCheck(e Entry) string {
	e.Check, e.Dir = "", ""
	b, err := json.Marshal(e)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// CorruptError is a cached output whose bytes are not the ones its step
// wrote (the record's digest): damaged or edited in place. The entry is
// evicted; the step must run again.
type CorruptError struct {
	Key, StepID, Path string
	// Problem says what is wrong with Path: "has sha256 …, the record
	// says …", "is not a regular file".
	Problem string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("the cached output of step %s (entry %s) is corrupt: %s %s; the entry was evicted and the step runs again",
		e.StepID, shortKey(e.Key), e.Path, e.Problem)
}

// Mismatch is a CorruptError's problem for a file whose sha256 is got
// where the record says want.
func Mismatch(want, got string) string {
	if got == "" {
		return "is missing"
	}
	return fmt.Sprintf("has sha256 %s, the record says %s", shortSum(got), shortSum(want))
}

func shortKey(k string) string {
	if len(k) > 12 {
		return k[:12]
	}
	return k
}

func shortSum(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}

// ReadFile reads a small file of an entry's output (at most limit bytes)
// and checks it against the record: a sidecar like result.json is
// digest-checked on every read, since a same-size edit keeps its stat.
func (c *Cache) ReadFile(e *Entry, rel string, limit int64) ([]byte, error) {
	var want *digest.FileDigest
	for i := range e.Tree.Files {
		if e.Tree.Files[i].Path == rel {
			want = &e.Tree.Files[i]
		}
	}
	if want == nil {
		return nil, fs.ErrNotExist
	}
	if want.Size > limit {
		return nil, fmt.Errorf("cache entry %s: %s is %d bytes, more than the %d this record may be", shortKey(e.Key), rel, want.Size, limit)
	}
	b, err := boundedfile.ReadNoFollow(filepath.Join(e.Dir, filepath.FromSlash(rel)), limit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &CorruptError{Key: e.Key, StepID: e.StepID, Path: rel, Problem: "is missing"}
	}
	if err != nil {
		return nil, &CorruptError{Key: e.Key, StepID: e.StepID, Path: rel, Problem: err.Error()}
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != want.SHA256 {
		return nil, &CorruptError{Key: e.Key, StepID: e.StepID, Path: rel, Problem: Mismatch(want.SHA256, got)}
	}
	return b, nil
}

// VerifyObject rehashes every file of an entry's output against the
// record; the first file that differs is a *CorruptError.
func (c *Cache) VerifyObject(e *Entry) error {
	td, err := (*digest.Memo)(nil).Tree(e.Dir)
	if err != nil {
		return &CorruptError{Key: e.Key, StepID: e.StepID, Path: "its folder", Problem: "cannot be read: " + err.Error()}
	}
	if td.SHA256 == e.Tree.SHA256 {
		return nil
	}
	got := map[string]string{}
	for _, f := range td.Files {
		got[f.Path] = f.SHA256
	}
	for _, f := range e.Tree.Files {
		if got[f.Path] != f.SHA256 {
			return &CorruptError{Key: e.Key, StepID: e.StepID, Path: f.Path, Problem: Mismatch(f.SHA256, got[f.Path])}
		}
	}
	return &CorruptError{Key: e.Key, StepID: e.StepID, Path: "its folder", Problem: "holds files the record does not list"}
}

// Evict removes a corrupt entry and its object, unless another process
// holds the key (it may be replacing them).
func (c *Cache) Evict(key string) {
	_, raw, err := c.readEntry(key)
	if err != nil {
		return
	}
	c.discardUnlessBusy(key, raw)
}
