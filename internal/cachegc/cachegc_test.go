package cachegc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/report"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

var (
	now    = time.Now().Truncate(time.Second)
	cutoff = now.Add(-24 * time.Hour)
	old    = now.Add(-48 * time.Hour)
	recent = now.Add(-time.Hour)
)

// installed are two toolchains the current lock names (their folders'
// names), for a cache to hold.
func installed(t *testing.T) (name1, dir1, name2, dir2 string) {
	t.Helper()
	var specs []toolchain.Spec
	for _, s := range toolchain.Specs() {
		if s.Kind != toolchain.KindExternal {
			specs = append(specs, s)
		}
	}
	if len(specs) < 2 {
		t.Fatalf("want two installable toolchains, have %d", len(specs))
	}
	return specs[0].Name, specs[0].DirName(), specs[1].Name, specs[1].DirName()
}

// file writes size bytes at CACHE/rel, its folders made.
func file(t *testing.T, root, rel string, size int) string {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), size), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// age sets the modification time of CACHE/rel.
func age(t *testing.T, root, rel string, when time.Time) {
	t.Helper()
	if err := os.Chtimes(filepath.Join(root, filepath.FromSlash(rel)), when, when); err != nil {
		t.Fatal(err)
	}
}

// layout is a cache with something old and something recent in every
// area. The first current toolchain was last used long ago, the second
// recently; "stale-recent" and "stale-old" are installs from older locks.
func layout(t *testing.T, root string) (old1, recent2 string) {
	t.Helper()
	_, dir1, _, dir2 := installed(t)
	file(t, root, "toolchains/"+dir1+"/bin/tool", 100)
	file(t, root, "toolchains/"+dir1+"/.last-used", 0)
	age(t, root, "toolchains/"+dir1+"/.last-used", old)
	file(t, root, "toolchains/"+dir2+"/bin/tool", 200)
	file(t, root, "toolchains/"+dir2+"/.last-used", 0)
	age(t, root, "toolchains/"+dir2+"/.last-used", recent)
	file(t, root, "toolchains/stale-recent/bin/tool", 30)
	age(t, root, "toolchains/stale-recent", recent)
	file(t, root, "toolchains/stale-old/bin/tool", 40)
	age(t, root, "toolchains/stale-old", old)
	file(t, root, "toolchains/logs/install-old.log", 5)
	file(t, root, "toolchains/logs/install-new.log", 6)
	age(t, root, "toolchains/logs/install-old.log", old)
	age(t, root, "toolchains/logs", old)

	file(t, root, "downloads/old.bin", 7)
	age(t, root, "downloads/old.bin", old)
	file(t, root, "downloads/new.bin", 8)
	file(t, root, "downloads/old-folder/a", 9)
	file(t, root, "downloads/old-folder/b", 10)
	age(t, root, "downloads/old-folder", old)
	file(t, root, "models/builtin/digits/model.onnx", 11)
	age(t, root, "models/builtin/digits", old)
	file(t, root, "models/builtin/fresh/model.onnx", 12)
	file(t, root, "logs/run-old.log", 13)
	age(t, root, "logs/run-old.log", old)
	file(t, root, "logs/run-new.log", 14)
	file(t, root, "uv/archive/wheel", 15)
	return filepath.Join(root, "toolchains", dir1), filepath.Join(root, "toolchains", dir2)
}

type row struct {
	Area, Path string
	Size       int64
}

func rows(items []Item) []row {
	var out []row
	for _, it := range items {
		out = append(out, row{it.Area, it.Path, it.Size})
	}
	return out
}

func TestOld(t *testing.T) {
	root := t.TempDir()
	dir1, _ := layout(t, root)
	j := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
	base := []row{
		{"downloads", j("downloads/old-folder"), 19},
		{"downloads", j("downloads/old.bin"), 7},
		{"logs", j("logs/run-old.log"), 13},
		{"logs", j("toolchains/logs/install-old.log"), 5},
		{"models", j("models/builtin/digits"), 11},
	}
	for _, tc := range []struct {
		name  string
		stale bool
		want  []row
	}{
		// The uv cache stays: the second toolchain was used recently.
		{"by age", false, append(base[:len(base):len(base)],
			row{"toolchains", j("toolchains/stale-old"), 40}, row{"toolchains", dir1, 100})},
		{"stale too", true, append(base[:len(base):len(base)],
			row{"toolchains", j("toolchains/stale-old"), 40}, row{"toolchains", j("toolchains/stale-recent"), 30}, row{"toolchains", dir1, 100})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items, err := Old(root, cutoff, tc.stale)
			if err != nil {
				t.Fatal(err)
			}
			got := rows(items)
			// Within an area the order is the folder's; compare as sets.
			if !sameRows(got, tc.want) {
				t.Errorf("got\n%v\nwant\n%v", got, tc.want)
			}
			for i := 1; i < len(items); i++ {
				if items[i-1].Area > items[i].Area {
					t.Errorf("not grouped by area: %s before %s", items[i-1].Area, items[i].Area)
				}
			}
			for _, it := range items {
				if !it.LastUsed.Before(cutoff) && !(tc.stale && it.Area == "toolchains") {
					t.Errorf("%s last used %v, after the cutoff", it.Path, it.LastUsed)
				}
			}
		})
	}
}

func sameRows(a, b []row) bool {
	if len(a) != len(b) {
		return false
	}
	count := map[row]int{}
	for _, r := range a {
		count[r]++
	}
	for _, r := range b {
		count[r]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

// The uv cache goes, whole, once no current toolchain was used since the
// cutoff; a recently touched install from an older lock does not keep it.
func TestOldUVCache(t *testing.T) {
	root := t.TempDir()
	_, dir1, _, dir2 := installed(t)
	file(t, root, "toolchains/"+dir1+"/.last-used", 0)
	age(t, root, "toolchains/"+dir1+"/.last-used", old)
	file(t, root, "toolchains/"+dir2+"/.complete", 0) // installed, never used since
	age(t, root, "toolchains/"+dir2+"/.complete", old)
	file(t, root, "toolchains/stale/x", 1)
	file(t, root, "uv/a", 3)
	file(t, root, "uv/b/c", 4)
	age(t, root, "uv", recent) // its own time does not matter
	items, err := Old(root, cutoff, false)
	if err != nil {
		t.Fatal(err)
	}
	var uv []Item
	for _, it := range items {
		if it.Area == "uv" {
			uv = append(uv, it)
		}
	}
	if len(uv) != 1 || uv[0].Path != filepath.Join(root, "uv") || uv[0].Size != 7 {
		t.Fatalf("uv items %+v, want the whole uv folder (7 bytes)", uv)
	}

	// Using the second toolchain now keeps it.
	age(t, root, "toolchains/"+dir2+"/.complete", recent)
	items, _ = Old(root, cutoff, false)
	for _, it := range items {
		if it.Area == "uv" {
			t.Errorf("uv selected although a current toolchain was used since the cutoff")
		}
	}
}

// A link is judged by its own age, not its target's: a dangling one is
// debris like any other old entry, and removing it leaves the target.
func TestOldLinks(t *testing.T) {
	root := t.TempDir()
	target := file(t, root, "elsewhere/big", 50)
	if err := os.MkdirAll(filepath.Join(root, "downloads"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, to := range map[string]string{"dangling": filepath.Join(root, "gone"), "link": target} {
		p := filepath.Join(root, "downloads", name)
		if err := os.Symlink(to, p); err != nil {
			t.Fatal(err)
		}
		tv := []unix.Timeval{unix.NsecToTimeval(old.UnixNano()), unix.NsecToTimeval(old.UnixNano())}
		if err := unix.Lutimes(p, tv); err != nil {
			t.Fatal(err)
		}
	}
	items, err := Old(root, cutoff, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []row{{"downloads", filepath.Join(root, "downloads", "dangling"), 0}, {"downloads", filepath.Join(root, "downloads", "link"), 0}}
	if got := rows(items); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, it := range items {
		if err := Remove(root, it); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(target); err != nil {
		t.Errorf("removing a link removed its target: %v", err)
	}
}

// An empty cache, or one without any of the areas, has nothing old.
func TestOldEmpty(t *testing.T) {
	items, err := Old(t.TempDir(), now, true)
	if err != nil || items != nil {
		t.Errorf("Old = %v, %v; want nothing", items, err)
	}
	root := t.TempDir()
	file(t, root, "downloads", 1) // a file where a folder belongs
	if _, err := Old(root, now, false); err == nil {
		t.Error("a downloads file in place of the folder was not an error")
	}
}

func TestRemove(t *testing.T) {
	root := t.TempDir()
	old1, recent2 := layout(t, root)
	items, err := Old(root, cutoff, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if err := Remove(root, it); err != nil {
			t.Fatalf("remove %s: %v", it.Path, err)
		}
		if _, err := os.Lstat(it.Path); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", it.Path, err)
		}
	}
	for _, kept := range []string{recent2, "downloads/new.bin", "logs/run-new.log", "toolchains/logs/install-new.log", "models/builtin/fresh", "uv/archive/wheel"} {
		if !filepath.IsAbs(kept) {
			kept = filepath.Join(root, filepath.FromSlash(kept))
		}
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
	// A toolchain folder that is already gone is no error.
	if err := Remove(root, Item{Area: "toolchains", Path: old1}); err != nil {
		t.Errorf("removing a vanished toolchain folder: %v", err)
	}
}

// A toolchain being installed (its install lock held) is not cut in half.
func TestRemoveWaitsForNoInstall(t *testing.T) {
	root := t.TempDir()
	old1, _ := layout(t, root)
	name1, _, _, _ := installed(t)
	lock, err := os.OpenFile(filepath.Join(root, "toolchains", "."+name1+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	err = Remove(root, Item{Area: "toolchains", Path: old1})
	if err == nil || !strings.Contains(err.Error(), "another edgepipe is installing it") {
		t.Errorf("err = %v, want the install in progress named", err)
	}
	if _, err := os.Stat(filepath.Join(old1, "bin", "tool")); err != nil {
		t.Errorf("the install was touched: %v", err)
	}
}

// entry commits a cache entry for step and dates its last use.
func entry(t *testing.T, c *cache.Cache, key, step string, size int, used time.Time) {
	t.Helper()
	release, err := c.Lock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	tmp, err := c.TempDir(key)
	if err != nil {
		t.Fatal(err)
	}
	file(t, tmp, "out.bin", size)
	if _, err := c.Commit(key, tmp, cache.Entry{Kind: "test", StepID: step}); err != nil {
		t.Fatal(err)
	}
	age(t, c.Root(), "entries/"+key+".json", used)
}

const (
	oldKey    = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	recentKey = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

func gcCache(t *testing.T) *cache.Cache {
	t.Helper()
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	layout(t, c.Root())
	entry(t, c, oldKey, "gguf-quantize:q4_k_m", 1000, old)
	entry(t, c, recentKey, "perplexity:q4_k_m", 2000, recent)
	return c
}

// A dry run says what would go, entries and folders, and removes nothing.
func TestGCDryRun(t *testing.T) {
	c := gcCache(t)
	before := snapshot(t, c.Root())
	var out bytes.Buffer
	if err := GC(context.Background(), &out, c, 24*time.Hour, true); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, c.Root()); !reflect.DeepEqual(before, after) {
		t.Errorf("a dry run changed the cache")
	}
	items, _ := Old(c.Root(), cutoff, false)
	var freed int64 = 1000
	want := []string{fmt.Sprintf("would remove entry %s (gguf-quantize:q4_k_m, last used %s)", oldKey[:12], old.Local().Format(time.DateTime))}
	for _, it := range items {
		want = append(want, fmt.Sprintf("would remove %s %s (%s, last used %s)", it.Area, it.Path, report.HumanBytes(it.Size), it.LastUsed.Local().Format(time.DateTime)))
		freed += it.Size
	}
	want = append(want, fmt.Sprintf("would remove %d entries and folders, freeing %s", len(items)+1, report.HumanBytes(freed)))
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(items) != 7 {
		t.Errorf("%d folders would go, want 7 (the layout's old ones)", len(items))
	}
}

// GC removes what the dry run named, and keeps the rest.
func TestGC(t *testing.T) {
	c := gcCache(t)
	items, _ := Old(c.Root(), cutoff, false)
	var out bytes.Buffer
	if err := GC(context.Background(), &out, c, 24*time.Hour, false); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.Lookup(oldKey); ok {
		t.Error("the old entry is still there")
	}
	if _, ok, _ := c.Lookup(recentKey); !ok {
		t.Error("the recent entry was removed")
	}
	for _, it := range items {
		if _, err := os.Lstat(it.Path); !os.IsNotExist(err) {
			t.Errorf("%s is still there", it.Path)
		}
	}
	if !strings.HasPrefix(out.String(), fmt.Sprintf("removed %d entries and folders, freed ", len(items)+1)) || strings.Contains(out.String(), "would") {
		t.Errorf("output %q", out.String())
	}
}

// Without --older-than only debris goes: every entry and folder stays.
func TestGCWithoutAge(t *testing.T) {
	c := gcCache(t)
	before := snapshot(t, c.Root())
	var out bytes.Buffer
	if err := GC(context.Background(), &out, c, 0, false); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, c.Root())
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s was removed", p)
		}
	}
	if out.String() != "removed 0 entries and folders, freed 0 B\n" {
		t.Errorf("output %q", out.String())
	}
}

// snapshot lists every path under root with its size.
func snapshot(t *testing.T, root string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRemoveFolders(t *testing.T) {
	root := t.TempDir()
	old1, recent2 := layout(t, root)
	folders, err := toolchain.Folders(root)
	if err != nil {
		t.Fatal(err)
	}
	var doomed []toolchain.Folder
	for _, f := range folders {
		if f.Dir == old1 || f.Dir == filepath.Join(root, "toolchains", "stale-old") {
			doomed = append(doomed, f)
		}
	}
	if len(doomed) != 2 {
		t.Fatalf("folders %+v", folders)
	}
	var out bytes.Buffer
	if err := RemoveFolders(&out, root, doomed, true); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("would remove %s (100 B)\nwould remove %s (40 B)\nwould free 140 B\n", doomed[0].Dir, doomed[1].Dir)
	if doomed[0].Dir != old1 {
		want = fmt.Sprintf("would remove %s (40 B)\nwould remove %s (100 B)\nwould free 140 B\n", doomed[0].Dir, doomed[1].Dir)
	}
	if out.String() != want {
		t.Errorf("dry run:\n%s\nwant\n%s", out.String(), want)
	}
	for _, f := range doomed {
		if _, err := os.Stat(f.Dir); err != nil {
			t.Errorf("a dry run removed %s", f.Dir)
		}
	}
	out.Reset()
	if err := RemoveFolders(&out, root, doomed, false); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "freed 140 B\n") || strings.Count(out.String(), "removed ") != 2 {
		t.Errorf("output %q", out.String())
	}
	for _, f := range doomed {
		if _, err := os.Stat(f.Dir); !os.IsNotExist(err) {
			t.Errorf("%s is still there", f.Dir)
		}
	}
	if _, err := os.Stat(recent2); err != nil {
		t.Errorf("%s, not doomed, was removed", recent2)
	}
}
