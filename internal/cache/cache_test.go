package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/digest"
)

func open(t *testing.T) *Cache {
	t.Helper()
	c, err := Open(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func key(t *testing.T, parts ...any) string {
	t.Helper()
	k, err := digest.Key(parts...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustBuild(t *testing.T, c *Cache, k string) {
	t.Helper()
	if built, err := buildOnce(context.Background(), c, k); err != nil || !built {
		t.Fatalf("build %s: built=%v err=%v", k, built, err)
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkContent fails unless e records exactly key's expected files and the
// object holds them.
func checkContent(t *testing.T, e *Entry) {
	t.Helper()
	want := expectedFiles(e.Key)
	if len(e.Tree.Files) != len(want) {
		t.Fatalf("entry %s lists %d files, want %d", e.Key, len(e.Tree.Files), len(want))
	}
	for _, f := range e.Tree.Files {
		data, ok := want[f.Path]
		if !ok || f.SHA256 != sha(data) || f.Size != int64(len(data)) {
			t.Fatalf("entry %s: file %+v is not what the key promised", e.Key, f)
		}
		got, err := os.ReadFile(filepath.Join(e.Dir, f.Path))
		if err != nil || sha(got) != f.SHA256 {
			t.Fatalf("entry %s: object file %s differs from its record (%v)", e.Key, f.Path, err)
		}
	}
}

func TestCommitAndLookup(t *testing.T) {
	c := open(t)
	k := key(t, "quantize", 1, map[string]any{"type": "Q4_K_M"})
	if _, ok, err := c.Lookup(k); ok || err != nil {
		t.Fatalf("empty cache: ok=%v err=%v", ok, err)
	}
	release, err := c.Lock(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	tmp, err := c.TempDir(k)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range expectedFiles(k) {
		os.MkdirAll(filepath.Dir(filepath.Join(tmp, name)), 0o755)
		os.WriteFile(filepath.Join(tmp, name), data, 0o644)
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := Entry{
		Kind: "quantize", StepID: "q4", Created: created, Duration: 1500 * time.Millisecond,
		Tools: map[string]string{"llama-quantize": "b4567"},
		Meta:  map[string]any{"ppl": 7.25, "note": "<ok>"},
	}
	e, err := c.Commit(k, tmp, rec)
	if err != nil {
		t.Fatal(err)
	}
	if e.Key != k || e.Dir != c.ObjectDir(k) || e.Tree.SHA256 == "" {
		t.Fatalf("committed entry %+v", e)
	}
	checkContent(t, e)
	want, _ := (*digest.Memo)(nil).Tree(e.Dir)
	if e.Tree.SHA256 != want.SHA256 {
		t.Fatal("recorded tree digest differs from the object's")
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir still there after commit: %v", err)
	}
	for _, f := range e.Tree.Files {
		fi, _ := os.Stat(filepath.Join(e.Dir, f.Path))
		if fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("cached file %s is writable (%v)", f.Path, fi.Mode())
		}
	}

	for _, verify := range []bool{false, true} {
		c.SetVerify(verify)
		got, ok, err := c.Lookup(k)
		if err != nil || !ok {
			t.Fatalf("verify=%v: lookup after commit: ok=%v err=%v", verify, ok, err)
		}
		if got.Kind != "quantize" || got.StepID != "q4" || !got.Created.Equal(created) ||
			got.Duration != rec.Duration || got.Tools["llama-quantize"] != "b4567" ||
			got.Meta["ppl"] != 7.25 || got.Meta["note"] != "<ok>" || got.Tree.SHA256 != e.Tree.SHA256 {
			t.Fatalf("looked-up entry %+v differs from committed %+v", got, e)
		}
	}
	list, err := c.List()
	if err != nil || len(list) != 1 || list[0].Key != k {
		t.Fatalf("List = %v, %v", list, err)
	}
}

// TestLookupMisses damages an entry in each way the stat checks see. An
// object whose files are not the record's (missing, resized, a link) is
// reported as a *CorruptError, so the run can say why the step runs
// again, and evicted; a record that is unreadable or edited, or an
// object folder that is gone, is a plain miss.
func TestLookupMisses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, c *Cache, e *Entry)
		corrupt string // the CorruptError's problem, or "" for a plain miss
	}{
		{"object gone", func(t *testing.T, c *Cache, e *Entry) { os.RemoveAll(e.Dir) }, ""},
		{"file gone", func(t *testing.T, c *Cache, e *Entry) {
			os.Remove(filepath.Join(e.Dir, e.Tree.Files[0].Path))
		}, "is missing"},
		{"file size changed", func(t *testing.T, c *Cache, e *Entry) {
			p := filepath.Join(e.Dir, e.Tree.Files[0].Path)
			os.Chmod(p, 0o644)
			f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("x")
			f.Close()
		}, "bytes, the record says"},
		{"entry corrupt", func(t *testing.T, c *Cache, e *Entry) {
			os.WriteFile(c.entryPath(e.Key), []byte(`{"key":`), 0o644)
		}, ""},
		{"entry for another key", func(t *testing.T, c *Cache, e *Entry) {
			data, _ := os.ReadFile(c.entryPath(e.Key))
			os.WriteFile(c.entryPath(e.Key), []byte(strings.Replace(string(data), e.Key, "other", 1)), 0o644)
		}, ""},
		{"file swapped for a link to same-size bytes", func(t *testing.T, c *Cache, e *Entry) {
			f := e.Tree.Files[0]
			other := filepath.Join(t.TempDir(), "other")
			os.WriteFile(other, make([]byte, f.Size), 0o644)
			p := filepath.Join(e.Dir, f.Path)
			os.Remove(p)
			os.Symlink(other, p)
		}, "is a link"},
		{"file swapped for a folder", func(t *testing.T, c *Cache, e *Entry) {
			p := filepath.Join(e.Dir, e.Tree.Files[0].Path)
			os.Remove(p)
			os.Mkdir(p, 0o755)
		}, "is not a regular file"},
		{"entry record edited", func(t *testing.T, c *Cache, e *Entry) {
			data, _ := os.ReadFile(c.entryPath(e.Key))
			os.WriteFile(c.entryPath(e.Key), []byte(strings.Replace(string(data), `"kind": "test"`, `"kind": "tset"`, 1)), 0o644)
		}, ""},
		{"entry record without its check", func(t *testing.T, c *Cache, e *Entry) {
			data, _ := os.ReadFile(c.entryPath(e.Key))
			var raw map[string]any
			json.Unmarshal(data, &raw)
			delete(raw, "check")
			data, _ = json.Marshal(raw)
			os.WriteFile(c.entryPath(e.Key), data, 0o644)
		}, ""},
		{"entry path escapes", func(t *testing.T, c *Cache, e *Entry) {
			data, _ := os.ReadFile(c.entryPath(e.Key))
			var raw Entry
			json.Unmarshal(data, &raw)
			raw.Tree.Files[0].Path = "../../x"
			data, _ = json.Marshal(raw)
			os.WriteFile(c.entryPath(e.Key), data, 0o644)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := open(t)
			k := key(t, tc.name)
			mustBuild(t, c, k)
			e, ok, _ := c.Lookup(k)
			if !ok {
				t.Fatal("no hit right after commit")
			}
			tc.damage(t, c, e)
			_, ok, err := c.Lookup(k)
			var corrupt *CorruptError
			switch {
			case ok:
				t.Fatal("a damaged entry is a hit")
			case tc.corrupt == "" && err != nil:
				t.Fatalf("damaged entry: %v, want a plain miss", err)
			case tc.corrupt != "" && (!errors.As(err, &corrupt) || !strings.Contains(corrupt.Problem, tc.corrupt) || corrupt.Path != e.Tree.Files[0].Path):
				t.Fatalf("damaged entry: %v, want a CorruptError: %s %s", err, e.Tree.Files[0].Path, tc.corrupt)
			case tc.corrupt != "":
				if _, err := os.Stat(c.entryPath(k)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("the damaged entry was not evicted: %v", err)
				}
				if _, ok, err := c.Lookup(k); ok || err != nil {
					t.Fatalf("after eviction: ok=%v err=%v, want a plain miss", ok, err)
				}
			}
			// The executor's path rebuilds and hits again.
			mustBuild(t, c, k)
			c.SetVerify(true)
			e, ok, err = c.Lookup(k)
			if !ok || err != nil {
				t.Fatalf("after rebuild: ok=%v err=%v", ok, err)
			}
			checkContent(t, e)
		})
	}
}

func tamper(t *testing.T, e *Entry) {
	t.Helper()
	f := e.Tree.Files[0]
	for _, g := range e.Tree.Files {
		if g.Size > 0 {
			f = g
		}
	}
	if f.Size == 0 {
		t.Skip("key produced only empty files")
	}
	p := filepath.Join(e.Dir, f.Path)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyCatchesTampering(t *testing.T) {
	c := open(t)
	k := key(t, "tamper")
	mustBuild(t, c, k)
	e, _, _ := c.Lookup(k)
	tamper(t, e)

	// Same size: the cheap check cannot see it, which is what Verify is for.
	c.SetVerify(true)
	if _, ok, err := c.Lookup(k); ok || err != nil {
		t.Fatalf("tampered object under Verify: ok=%v err=%v, want a miss", ok, err)
	}
	if _, err := os.Stat(c.entryPath(k)); !errors.Is(err, os.ErrNotExist) {
		t.Error("entry of a tampered object was kept")
	}
	if _, err := os.Stat(e.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Error("tampered object was kept")
	}
	mustBuild(t, c, k)
	e, ok, _ := c.Lookup(k)
	if !ok {
		t.Fatal("no hit after rebuilding")
	}
	checkContent(t, e)

	// While another holder has the key, a bad object is a miss but is left
	// to that holder (which may be replacing it).
	tamper(t, e)
	release, _ := c.Lock(context.Background(), k)
	if _, ok, _ := c.Lookup(k); ok {
		t.Fatal("tampered object hit under Verify")
	}
	if _, err := os.Stat(c.entryPath(k)); err != nil {
		t.Error("a busy key's entry was removed")
	}
	release()
}

// A same-size edit keeps the stat checks happy; ReadFile and VerifyObject
// are the reads that must still refuse it, with a CorruptError that names
// the file, and Evict must leave a plain miss.
func TestReadFileAndVerifyObjectCatchInPlaceEdits(t *testing.T) {
	c := open(t)
	k := key(t, "in-place")
	mustBuild(t, c, k)
	e, ok, _ := c.Lookup(k)
	if !ok {
		t.Fatal("no hit right after commit")
	}
	if err := c.VerifyObject(e); err != nil {
		t.Fatalf("intact object: %v", err)
	}
	for _, f := range e.Tree.Files {
		b, err := c.ReadFile(e, f.Path, f.Size)
		if err != nil || sha(b) != f.SHA256 {
			t.Fatalf("ReadFile(%s) of an intact object: err=%v", f.Path, err)
		}
		if f.Size > 0 {
			if _, err := c.ReadFile(e, f.Path, f.Size-1); err == nil {
				t.Errorf("ReadFile(%s) read past its limit", f.Path)
			}
		}
	}
	if _, err := c.ReadFile(e, "not-recorded", 1<<20); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile of a file the record lacks: %v, want ErrNotExist", err)
	}

	tamper(t, e)
	if _, ok, err := c.Lookup(k); !ok || err != nil {
		t.Fatalf("same-size edit: the cheap lookup should still hit (ok=%v err=%v); the reads below are what catch it", ok, err)
	}
	var corrupt *CorruptError
	if err := c.VerifyObject(e); !errors.As(err, &corrupt) || corrupt.Path == "its folder" || !strings.Contains(err.Error(), "the record says") {
		t.Fatalf("VerifyObject of an edited object: %v, want a CorruptError naming the file", err)
	}
	if _, err := c.ReadFile(e, corrupt.Path, 1<<20); !errors.As(err, &corrupt) {
		t.Fatalf("ReadFile of the edited file: %v, want a CorruptError", err)
	}
	c.Evict(k)
	if _, ok, err := c.Lookup(k); ok || err != nil {
		t.Fatalf("after Evict: ok=%v err=%v, want a plain miss", ok, err)
	}
	if _, err := os.Stat(e.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Error("Evict kept the object")
	}
}

// Commit stores regular files only: a relative link inside the output
// becomes a copy of its target, so a later Lstat can tell a link swapped
// in afterwards.
func TestCommitResolvesInternalLinks(t *testing.T) {
	c := open(t)
	k := key(t, "links")
	tmp, err := c.TempDir(k)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(tmp, "weights.bin"), []byte("weights"), 0o644)
	if err := os.Symlink("weights.bin", filepath.Join(tmp, "alias.bin")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commit(k, tmp, Entry{Kind: "test", StepID: "links"}); err != nil {
		t.Fatal(err)
	}
	e, ok, err := c.Lookup(k)
	if !ok || err != nil {
		t.Fatalf("lookup: ok=%v err=%v", ok, err)
	}
	fi, err := os.Lstat(filepath.Join(e.Dir, "alias.bin"))
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("alias.bin in the object: %v %v, want a regular file", fi, err)
	}
	if err := c.VerifyObject(e); err != nil {
		t.Fatal(err)
	}
}

func TestLeftoverObjectIsReplaced(t *testing.T) {
	c := open(t)
	k := key(t, "leftover")
	// What a kill between the object's rename and the entry's write leaves.
	stale := filepath.Join(c.ObjectDir(k), "stale.bin")
	os.MkdirAll(filepath.Dir(stale), 0o755)
	os.WriteFile(stale, []byte("half a model"), 0o644)

	if _, ok, err := c.Lookup(k); ok || err != nil {
		t.Fatalf("object without entry: ok=%v err=%v", ok, err)
	}
	mustBuild(t, c, k)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Error("commit kept a file of the leftover object")
	}
	c.SetVerify(true)
	e, ok, _ := c.Lookup(k)
	if !ok {
		t.Fatal("no hit after replacing the leftover")
	}
	checkContent(t, e)
}

func TestCommitRejects(t *testing.T) {
	c := open(t)
	k := key(t, "rejects")
	if _, err := c.Commit(k, t.TempDir(), Entry{}); err == nil || !strings.Contains(err.Error(), "TempDir") {
		t.Errorf("commit of a foreign dir: %v", err)
	}
	other, _ := c.TempDir("otherkey")
	if _, err := c.Commit(k, other, Entry{}); err == nil {
		t.Error("commit of another key's temp dir succeeded")
	}
	tmp, _ := c.TempDir(k)
	os.WriteFile(filepath.Join(tmp, "f"), []byte("x"), 0o644)
	os.Symlink(filepath.Join(tmp, "f"), filepath.Join(tmp, "abs-link"))
	if _, err := c.Commit(k, tmp, Entry{}); err == nil || !strings.Contains(err.Error(), "relative") {
		t.Errorf("commit with an absolute symlink: %v", err)
	}
	if _, ok, _ := c.Lookup(k); ok {
		t.Error("a failed commit left an entry")
	}
	c.Abort(tmp)
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Error("Abort left the temp dir")
	}
	for _, bad := range []string{"", "../x", "a/b", "a.b", strings.Repeat("a", 129)} {
		if _, _, err := c.Lookup(bad); err == nil {
			t.Errorf("Lookup(%q) accepted a bad key", bad)
		}
		if _, err := c.TempDir(bad); err == nil {
			t.Errorf("TempDir(%q) accepted a bad key", bad)
		}
	}
}

func TestLockSerialisesGoroutines(t *testing.T) {
	c := open(t)
	k := key(t, "goroutines")
	var holders, maxHolders atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				release, err := c.Lock(context.Background(), k)
				if err != nil {
					t.Error(err)
					return
				}
				n := holders.Add(1)
				if n > maxHolders.Load() {
					maxHolders.Store(n)
				}
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				holders.Add(-1)
				release()
				release() // harmless twice
			}
		})
	}
	wg.Wait()
	if maxHolders.Load() != 1 {
		t.Fatalf("%d goroutines held the lock at once", maxHolders.Load())
	}
}

func TestLockHonoursContext(t *testing.T) {
	c := open(t)
	k := key(t, "ctx")
	release, _ := c.Lock(context.Background(), k)
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := c.Lock(ctx, k); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a held key with an expiring context: %v", err)
	}
	if _, ok, _ := c.TryLock(k); ok {
		t.Fatal("TryLock took a held lock")
	}
}

func TestLockSerialisesProcesses(t *testing.T) {
	c := open(t)
	k := key(t, "processes")
	release, err := c.Lock(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	h := startHelper(t, "lock", c.Root(), k)
	h.expect(t, "waiting")
	// Give the helper ample time to (wrongly) take the lock; a correct lock
	// makes this check pass however long it waits.
	time.Sleep(100 * time.Millisecond)
	select {
	case line := <-h.lines:
		t.Fatalf("helper said %q while this process held the lock", line)
	default:
	}
	release()
	h.expect(t, "locked")
	if _, ok, _ := c.TryLock(k); ok {
		t.Fatal("took the lock while the helper process held it")
	}
	h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	r, ok, err := c.TryLock(k)
	if !ok || err != nil {
		t.Fatalf("lock not free after the helper exited: %v", err)
	}
	r()
}

func TestTwoProcessesBuildOnce(t *testing.T) {
	c := open(t)
	for i := range 3 {
		k := key(t, "build-once", i)
		// Hold the key until both helpers are waiting on it, so they race.
		release, _ := c.Lock(context.Background(), k)
		a := startHelper(t, "build-once", c.Root(), k)
		b := startHelper(t, "build-once", c.Root(), k)
		a.expect(t, "waiting")
		b.expect(t, "waiting")
		release()
		got := []string{a.next(t), b.next(t)}
		slices.Sort(got)
		if got[0] != "built" || got[1] != "hit" {
			t.Fatalf("two processes on one key said %v, want one built and one hit", got)
		}
		a.cmd.Wait()
		b.cmd.Wait()
		e, ok, _ := c.Lookup(k)
		if !ok {
			t.Fatal("no entry after the helpers finished")
		}
		checkContent(t, e)
	}
}

// checkCache fails unless every record in entries/ is whole, and every
// entry is complete, verifies, and holds what its key promised.
func checkCache(t *testing.T, root string) int {
	t.Helper()
	names, _ := os.ReadDir(filepath.Join(root, entriesDir))
	for _, n := range names {
		k, ok := strings.CutSuffix(n.Name(), ".json")
		if !ok || strings.HasPrefix(n.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, entriesDir, n.Name()))
		var e Entry
		if err != nil || json.Unmarshal(data, &e) != nil || e.Key != k {
			t.Fatalf("record %s is torn or wrong: %v %.60q", n.Name(), err, data)
		}
	}
	vc, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	vc.SetVerify(true)
	list, err := vc.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		got, ok, err := vc.Lookup(e.Key)
		if err != nil || !ok {
			t.Fatalf("entry %s does not verify: ok=%v err=%v", e.Key, ok, err)
		}
		checkContent(t, got)
	}
	return len(list)
}

func TestKillDuringCommit(t *testing.T) {
	const keys = 60
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	root := filepath.Join(t.TempDir(), "cache")
	if _, err := Open(root); err != nil {
		t.Fatal(err)
	}
	n := "EPCACHE_N=" + itoa(keys)
	for round := range rounds {
		h := startHelper(t, "commit-loop", root, "", n)
		h.expect(t, "ready")
		time.Sleep(time.Duration(rand.IntN(40_000)) * time.Microsecond)
		if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		h.cmd.Wait()
		entries := checkCache(t, root)
		t.Logf("round %d: %d entries after SIGKILL", round, entries)
	}

	// A run that is not killed finishes the job over whatever was left.
	h := startHelper(t, "commit-loop", root, "", n)
	h.expect(t, "ready")
	h.expect(t, "done")
	if err := h.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := checkCache(t, root); got != keys {
		t.Fatalf("%d entries after a full run, want %d", got, keys)
	}

	c, _ := Open(root)
	if _, _, err := c.GC(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(root, tmpDir)); len(left) != 0 {
		t.Errorf("GC left %d temp dirs of killed runs", len(left))
	}
	objects, _ := os.ReadDir(filepath.Join(root, objectsDir))
	if len(objects) != keys {
		t.Errorf("%d objects for %d entries after GC", len(objects), keys)
	}
	if junk, _ := filepath.Glob(filepath.Join(root, entriesDir, ".*")); len(junk) != 0 {
		t.Errorf("GC left half-written records: %v", junk)
	}
	if got := checkCache(t, root); got != keys {
		t.Fatalf("GC changed the entries: %d, want %d", got, keys)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func deadPid(t *testing.T) int {
	t.Helper()
	h := startHelper(t, "exit", "", "")
	h.cmd.Wait()
	return h.cmd.Process.Pid
}

func TestGC(t *testing.T) {
	c := open(t)
	ctx := context.Background()
	kA, kB, kC := key(t, "A"), key(t, "B"), key(t, "C")
	for _, k := range []string{kA, kB, kC} {
		mustBuild(t, c, k)
	}
	size := func(k string) int64 {
		e, _, _ := c.Lookup(k)
		return e.Tree.Size
	}
	wantFreed := size(kA)

	// Busy: C is locked by someone, so it stays although keep rejects it.
	releaseC, _ := c.Lock(ctx, kC)
	defer releaseC()

	mkdir := func(p string, data string) {
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, "f"), []byte(data), 0o644)
		wantFreed += int64(len(data))
	}
	orphan := c.ObjectDir(key(t, "D"))
	mkdir(orphan, "orphan")
	dead := deadPid(t)
	deadTmp := filepath.Join(c.Root(), tmpDir, key(t, "E")+"."+itoa(dead)+".1")
	mkdir(deadTmp, "dead")
	oldTmp := filepath.Join(c.Root(), tmpDir, key(t, "F")+"."+itoa(os.Getpid())+".2")
	mkdir(oldTmp, "old")
	twoHoursAgo := time.Now().Add(-2 * time.Hour)
	os.Chtimes(oldTmp, twoHoursAgo, twoHoursAgo)
	liveTmp, _ := c.TempDir(key(t, "G"))
	deadRecord := filepath.Join(c.Root(), entriesDir, "."+kB+".json.tmp-"+itoa(dead)+"-9")
	liveRecord := filepath.Join(c.Root(), entriesDir, "."+kB+".json.tmp-"+itoa(os.Getpid())+"-9")
	os.WriteFile(deadRecord, []byte("{"), 0o644)
	os.WriteFile(liveRecord, []byte("{"), 0o644)
	unusedLock := key(t, "H")
	r, _ := c.Lock(ctx, unusedLock)
	r()

	removed, freed, err := c.GC(ctx, func(e Entry) bool { return e.Key == kB })
	if err != nil {
		t.Fatal(err)
	}
	if removed != 4 || freed != wantFreed {
		t.Errorf("GC removed %d, freed %d; want 4 and %d", removed, freed, wantFreed)
	}
	for p, want := range map[string]bool{
		c.entryPath(kA): false, c.ObjectDir(kA): false,
		c.entryPath(kB): true, c.ObjectDir(kB): true,
		c.entryPath(kC): true, c.ObjectDir(kC): true,
		orphan: false, deadTmp: false, oldTmp: false, liveTmp: true,
		deadRecord: false, liveRecord: true,
		filepath.Join(c.Root(), locksDir, unusedLock+".lock"): false,
		filepath.Join(c.Root(), locksDir, kA+".lock"):         false,
		filepath.Join(c.Root(), locksDir, kB+".lock"):         true,
	} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("after GC, %s exists=%v, want %v", strings.TrimPrefix(p, c.Root()), err == nil, want)
		}
	}
	if _, ok, _ := c.Lookup(kB); !ok {
		t.Error("GC broke a kept entry")
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := c.GC(cancelled, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("GC with a cancelled context: %v", err)
	}
}

func TestGCDuringLockWaitKeepsLocking(t *testing.T) {
	// GC deletes lock files; a process that opened the file just before
	// must not end up holding a lock nobody else sees.
	c := open(t)
	k := key(t, "gc-lock")
	release, _ := c.Lock(context.Background(), k)
	got := make(chan func(), 1)
	go func() {
		r, err := c.Lock(context.Background(), k)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	time.Sleep(20 * time.Millisecond)
	c.removeLockFile(k) // what GC does while holding the lock
	release()
	r := <-got
	if _, ok, _ := c.TryLock(k); ok {
		t.Fatal("after the lock file was replaced, two holders had the key")
	}
	r()
}

func TestMemoLivesInCache(t *testing.T) {
	root := filepath.Join(t.TempDir(), "cache")
	c, _ := Open(root)
	input := filepath.Join(t.TempDir(), "weights.bin")
	os.WriteFile(input, make([]byte, 1<<20), 0o644)
	fi, _ := os.Stat(input)
	if fi.ModTime().Nanosecond() == 0 {
		t.Skip("whole-second timestamps: the memo waits 2s before trusting a new file")
	}
	time.Sleep(200 * time.Millisecond) // past the memo's racy window for new files
	if _, err := c.Memo().File(input); err != nil {
		t.Fatal(err)
	}
	if err := c.Memo().Save(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, memoFile)); err != nil {
		t.Fatal(err)
	}
	c2, _ := Open(root)
	if _, err := c2.Memo().File(input); err != nil {
		t.Fatal(err)
	}
	if c2.Memo().BytesHashed() != 0 {
		t.Fatalf("reopened cache's memo read %d bytes of an unchanged input", c2.Memo().BytesHashed())
	}
	c2.SetVerify(true)
	c2.Memo().File(input)
	if c2.Memo().BytesHashed() != 1<<20 {
		t.Fatal("Verify did not rehash the input")
	}
}

// A step may build for hours: its temp and scratch dirs are kept by GC
// while its process holds them, however old they look, and removed once
// it is gone.
func TestGCKeepsDirsInUse(t *testing.T) {
	c := open(t)
	k := key(t, "long step")
	tmp, err := c.TempDir(k)
	if err != nil {
		t.Fatal(err)
	}
	scratch, release, err := c.ScratchDir(k)
	if err != nil {
		t.Fatal(err)
	}
	longAgo := time.Now().Add(-3 * staleAge)
	for _, d := range []string{tmp, scratch} {
		os.WriteFile(filepath.Join(d, "part"), []byte("x"), 0o644)
		os.Chtimes(d, longAgo, longAgo)
	}
	if _, _, err := c.GC(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{tmp, scratch} {
		if _, err := os.Stat(filepath.Join(d, "part")); err != nil {
			t.Errorf("GC removed %s while its step was using it", filepath.Base(d))
		}
	}
	release()
	c.Abort(tmp)
	if _, err := os.Stat(scratch); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("release kept the scratch dir")
	}

	// Abandoned (no holder) and old: removed.
	stale, err := c.TempDir(k)
	if err != nil {
		t.Fatal(err)
	}
	c.releaseDir(stale)
	os.Chtimes(stale, longAgo, longAgo)
	if _, _, err := c.GC(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("GC kept an abandoned old temp dir")
	}
}

func TestUserRoot(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if got, _ := UserRoot(env(map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/h"})); got != "/x/edgepipe" {
		t.Errorf("XDG_CACHE_HOME: %s", got)
	}
	if got, _ := UserRoot(env(map[string]string{"HOME": "/h"})); got != "/h/.cache/edgepipe" {
		t.Errorf("HOME: %s", got)
	}
	// Root: EDGEPIPE_CACHE first, as the CLI reads it, else UserRoot.
	if got, _ := Root(env(map[string]string{"EDGEPIPE_CACHE": "/e", "HOME": "/h"})); got != "/e" {
		t.Errorf("Root with EDGEPIPE_CACHE: %s", got)
	}
	if got, _ := Root(env(map[string]string{"HOME": "/h"})); got != "/h/.cache/edgepipe" {
		t.Errorf("Root without EDGEPIPE_CACHE: %s", got)
	}
}
