package digest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(b)
	return b
}

// trustAllWrites turns off the racy-timestamp rule so that a file hashed
// right after it was written is remembered; tests that change files make
// their changes visible in the identity explicitly.
func trustAllWrites(t *testing.T) {
	fine, coarse := racyWindowFine, racyWindowCoarse
	racyWindowFine, racyWindowCoarse = 0, 0
	t.Cleanup(func() { racyWindowFine, racyWindowCoarse = fine, coarse })
}

func TestFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"abc", []byte("abc")},
		{"one buffer", randomBytes(readBufSize, 1)},
		{"buffers and a bit", randomBytes(3*readBufSize+12345, 2)},
		{"more than the pipeline holds", randomBytes(pipelineBufs*readBufSize*3+1, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			writeFile(t, p, tc.data)
			sum, size, err := File(p)
			if err != nil {
				t.Fatal(err)
			}
			if sum != sha(tc.data) || size != int64(len(tc.data)) {
				t.Fatalf("File = %s %d, want %s %d", sum, size, sha(tc.data), len(tc.data))
			}
		})
	}
	if sum, _, _ := File(filepath.Join(dir, "abc")); sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("sha256(abc) = %s", sum)
	}
	if _, _, err := File(filepath.Join(dir, "missing")); err == nil {
		t.Error("File of a missing file succeeded")
	}
}

type errReader struct{ n int }

func (r *errReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, syscall.EIO
	}
	r.n--
	return len(p), nil
}

func TestHashReaderReportsReadError(t *testing.T) {
	if _, _, err := hashReader(&errReader{n: 5}); err != syscall.EIO {
		t.Fatalf("err = %v, want EIO", err)
	}
}

func TestMemoHitReadsNothing(t *testing.T) {
	trustAllWrites(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "w.bin")
	data := randomBytes(3<<20, 4)
	writeFile(t, p, data)

	m, err := OpenMemo(filepath.Join(dir, "memo.json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := m.File(p)
	if err != nil {
		t.Fatal(err)
	}
	if d.SHA256 != sha(data) || d.Size != int64(len(data)) || d.Path != filepath.ToSlash(p) {
		t.Fatalf("first digest = %+v", d)
	}
	if m.BytesHashed() != int64(len(data)) || m.Misses() != 1 {
		t.Fatalf("first lookup hashed %d bytes, %d misses", m.BytesHashed(), m.Misses())
	}
	if err := m.Save(); err != nil {
		t.Fatal(err)
	}

	// A new memo from the saved file: what the next run sees.
	m2, err := OpenMemo(filepath.Join(dir, "memo.json"))
	if err != nil {
		t.Fatal(err)
	}
	d2, err := m2.File(p)
	if err != nil {
		t.Fatal(err)
	}
	if d2 != d {
		t.Fatalf("memo hit = %+v, want %+v", d2, d)
	}
	if m2.BytesHashed() != 0 || m2.Hits() != 1 {
		t.Fatalf("memo hit read %d bytes, hits=%d", m2.BytesHashed(), m2.Hits())
	}
	// Relative paths find the same entry.
	t.Chdir(dir)
	if _, err := m2.File("w.bin"); err != nil {
		t.Fatal(err)
	}
	if m2.BytesHashed() != 0 {
		t.Fatalf("relative-path lookup read %d bytes", m2.BytesHashed())
	}
}

func TestMemoRehashesOnChange(t *testing.T) {
	trustAllWrites(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	orig := []byte("original content")
	m, _ := OpenMemo("")

	check := func(t *testing.T, want []byte, wantHashed bool) {
		t.Helper()
		before := m.BytesHashed()
		d, err := m.File(p)
		if err != nil {
			t.Fatal(err)
		}
		if d.SHA256 != sha(want) {
			t.Fatalf("digest %s, want %s (content %q)", d.SHA256, sha(want), want)
		}
		if hashed := m.BytesHashed() != before; hashed != wantHashed {
			t.Fatalf("hashed = %v, want %v", hashed, wantHashed)
		}
	}
	reset := func(t *testing.T) {
		writeFile(t, p, orig)
		check(t, orig, true)
		check(t, orig, false)
	}

	t.Run("size", func(t *testing.T) {
		reset(t)
		f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString("!")
		f.Close()
		check(t, append(bytes.Clone(orig), '!'), true)
	})
	t.Run("mtime", func(t *testing.T) {
		reset(t)
		// Same size, different bytes, and a different mtime.
		changed := bytes.ToUpper(orig)
		if err := os.WriteFile(p, changed, 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		check(t, changed, true)
		check(t, changed, false)
	})
	t.Run("mtime set back", func(t *testing.T) {
		// Writing and then restoring the old mtime (as some tools do)
		// still moves ctime, which cannot be set back.
		reset(t)
		fi := mustStat(t, p)
		m.mu.Lock()
		e := m.entries[p]
		m.mu.Unlock()
		time.Sleep(10 * time.Millisecond) // let the kernel's timestamp clock tick
		changed := bytes.ToUpper(orig)
		os.WriteFile(p, changed, 0o644)
		os.Chtimes(p, fi.ModTime(), fi.ModTime())
		id, _ := identityOf(mustStat(t, p))
		if id.MtimeNs != e.MtimeNs || id.CtimeNs == e.CtimeNs {
			t.Skip("this filesystem's ctime did not move on write; nothing to test")
		}
		check(t, changed, true)
	})
	t.Run("inode", func(t *testing.T) {
		reset(t)
		// Replace by rename; same size and, forcibly, the same mtime.
		fi := mustStat(t, p)
		other := filepath.Join(dir, "other")
		changed := bytes.ToUpper(orig)
		writeFile(t, other, changed)
		os.Chtimes(other, fi.ModTime(), fi.ModTime())
		if err := os.Rename(other, p); err != nil {
			t.Fatal(err)
		}
		check(t, changed, true)
	})
	t.Run("verify", func(t *testing.T) {
		reset(t)
		m.SetVerify(true)
		defer m.SetVerify(false)
		check(t, orig, true)
		check(t, orig, true)
	})
}

func mustStat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

func TestMemoDoesNotTrustJustWrittenFiles(t *testing.T) {
	fine, coarse := racyWindowFine, racyWindowCoarse
	racyWindowFine, racyWindowCoarse = time.Hour, time.Hour
	t.Cleanup(func() { racyWindowFine, racyWindowCoarse = fine, coarse })

	p := filepath.Join(t.TempDir(), "f")
	writeFile(t, p, []byte("fresh"))
	m, _ := OpenMemo("")
	for range 2 {
		if _, err := m.File(p); err != nil {
			t.Fatal(err)
		}
	}
	if m.Misses() != 2 || m.BytesHashed() != 10 {
		t.Fatalf("misses=%d hashed=%d; a file written within the racy window must be rehashed", m.Misses(), m.BytesHashed())
	}
	// Once the window has passed (here: it is shrunk), it is remembered.
	racyWindowFine, racyWindowCoarse = 0, 0
	m.File(p)
	m.File(p)
	if m.Misses() != 3 || m.Hits() != 1 {
		t.Fatalf("misses=%d hits=%d after the window", m.Misses(), m.Hits())
	}
}

func TestRacy(t *testing.T) {
	start := time.Unix(1000, 500)
	at := func(d time.Duration) int64 { return start.Add(d).UnixNano() }
	for _, tc := range []struct {
		name         string
		mtime, ctime int64
		want         bool
	}{
		{"old", at(-time.Minute), at(-time.Minute), false},
		{"just before", at(-time.Millisecond), at(-time.Minute), true},
		{"ctime recent", at(-time.Minute), at(-time.Millisecond), true},
		{"after start", at(time.Second), at(time.Second), true},
		{"second resolution, 1s old", time.Unix(999, 0).UnixNano(), time.Unix(999, 0).UnixNano(), true},
		{"second resolution, 3s old", time.Unix(997, 0).UnixNano(), time.Unix(997, 0).UnixNano(), false},
	} {
		if got := racy(fileIdentity{MtimeNs: tc.mtime, CtimeNs: tc.ctime}, start); got != tc.want {
			t.Errorf("%s: racy = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMemoCorruptFileStartsEmpty(t *testing.T) {
	trustAllWrites(t)
	dir := t.TempDir()
	memoPath := filepath.Join(dir, "memo.json")
	p := filepath.Join(dir, "f")
	writeFile(t, p, []byte("data"))
	for _, content := range []string{"{not json", `{"version":99,"entries":{}}`, "", `{"version":1,"entries":{"relative":{"sha256":"x"}}}`} {
		writeFile(t, memoPath, []byte(content))
		m, err := OpenMemo(memoPath)
		if err != nil {
			t.Fatalf("memo %q: %v", content, err)
		}
		if len(m.entries) != 0 {
			t.Fatalf("memo %q loaded %d entries", content, len(m.entries))
		}
		if _, err := m.File(p); err != nil {
			t.Fatal(err)
		}
		if err := m.Save(); err != nil {
			t.Fatal(err)
		}
		m2, _ := OpenMemo(memoPath)
		if len(m2.entries) != 1 {
			t.Fatalf("after saving over %q: %d entries", content, len(m2.entries))
		}
	}
}

func TestMemoSaveMergesAndPrunes(t *testing.T) {
	trustAllWrites(t)
	dir := t.TempDir()
	memoPath := filepath.Join(dir, "memo.json")
	a, b, gone := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "gone")
	writeFile(t, a, []byte("a"))
	writeFile(t, b, []byte("b"))
	writeFile(t, gone, []byte("gone"))

	m0, _ := OpenMemo(memoPath)
	m0.File(gone)
	if err := m0.Save(); err != nil {
		t.Fatal(err)
	}
	os.Remove(gone)

	// Two processes that loaded the same memo each hash one file.
	m1, _ := OpenMemo(memoPath)
	m2, _ := OpenMemo(memoPath)
	m1.File(a)
	m2.File(b)
	if err := m1.Save(); err != nil {
		t.Fatal(err)
	}
	if err := m2.Save(); err != nil {
		t.Fatal(err)
	}
	m3, _ := OpenMemo(memoPath)
	if _, ok := m3.entries[a]; !ok {
		t.Error("the first saver's entry was lost")
	}
	if _, ok := m3.entries[b]; !ok {
		t.Error("the second saver's entry is missing")
	}
	if _, ok := m3.entries[gone]; ok {
		t.Error("entry for a deleted file was kept")
	}
	// Nothing changed: Save must not rewrite the file.
	before := mustStat(t, memoPath)
	m3.File(a)
	if err := m3.Save(); err != nil {
		t.Fatal(err)
	}
	if after := mustStat(t, memoPath); !os.SameFile(before, after) {
		t.Error("Save rewrote an unchanged memo")
	}
}

func TestMemoConcurrentSavesNeverTear(t *testing.T) {
	trustAllWrites(t)
	dir := t.TempDir()
	memoPath := filepath.Join(dir, "memo.json")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			m, err := OpenMemo(memoPath)
			if err != nil {
				t.Error(err)
				return
			}
			for j := range 20 {
				p := filepath.Join(dir, "files", string(rune('a'+i)), string(rune('a'+j)))
				writeFile(t, p, []byte(p))
				if _, err := m.File(p); err != nil {
					t.Error(err)
				}
				if err := m.Save(); err != nil {
					t.Error(err)
				}
				data, err := os.ReadFile(memoPath)
				if err != nil || !strings.HasPrefix(string(data), `{"version":1,`) || !strings.HasSuffix(string(data), "}") {
					t.Errorf("memo file torn or unreadable: %v %.40q", err, data)
				}
			}
		})
	}
	wg.Wait()
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".memo.json.tmp-*"))
	if len(leftovers) != 0 {
		t.Errorf("temp files left behind: %v", leftovers)
	}
}

func TestMemoConcurrentLookupsReadOnce(t *testing.T) {
	trustAllWrites(t)
	p := filepath.Join(t.TempDir(), "big")
	data := randomBytes(8<<20, 5)
	writeFile(t, p, data)
	m, _ := OpenMemo("")
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			d, err := m.File(p)
			if err != nil || d.SHA256 != sha(data) {
				t.Errorf("digest %+v, %v", d, err)
			}
		})
	}
	wg.Wait()
	if m.BytesHashed() != int64(len(data)) {
		t.Errorf("16 concurrent lookups read %d bytes, want one read of %d", m.BytesHashed(), len(data))
	}
	if m.Hits()+m.Misses() != 16 {
		t.Errorf("hits %d + misses %d != 16", m.Hits(), m.Misses())
	}
}

func TestTree(t *testing.T) {
	trustAllWrites(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "model")
	files := map[string][]byte{
		"config.json":          []byte(`{"a":1}`),
		"a.b":                  []byte("dot sorts before slash"),
		"a/x":                  []byte("nested"),
		"weights/part-1.bin":   randomBytes(2<<20, 6),
		"weights/part-2.bin":   randomBytes(1<<20, 7),
		"weights/deeper/empty": nil,
	}
	for name, data := range files {
		writeFile(t, filepath.Join(root, name), data)
	}
	if err := os.Symlink("config.json", filepath.Join(root, "link.json")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, "empty-dir"), 0o755)

	want := []string{"a.b", "a/x", "config.json", "link.json", "weights/deeper/empty", "weights/part-1.bin", "weights/part-2.bin"}
	var listing strings.Builder
	var total int64
	for _, name := range want {
		data := files[name]
		if name == "link.json" {
			data = files["config.json"]
		}
		listing.WriteString(name + "\x00" + sha(data) + "\x00" + strconv.Itoa(len(data)) + "\n")
		total += int64(len(data))
	}

	m, _ := OpenMemo("")
	for _, memo := range []*Memo{nil, m} {
		td, err := memo.Tree(root)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range td.Files {
			got = append(got, f.Path)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("paths %v, want %v", got, want)
		}
		if td.SHA256 != sha([]byte(listing.String())) || td.Size != total {
			t.Fatalf("tree digest %s size %d, want %s %d", td.SHA256, td.Size, sha([]byte(listing.String())), total)
		}
	}

	// Through a symlinked root, the same digest.
	linkRoot := filepath.Join(dir, "model-link")
	os.Symlink(root, linkRoot)
	td1, _ := m.Tree(root)
	td2, err := m.Tree(linkRoot)
	if err != nil || td2.SHA256 != td1.SHA256 {
		t.Fatalf("tree through a symlinked root: %v, %s vs %s", err, td2.SHA256, td1.SHA256)
	}

	// One changed byte changes the digest.
	p := filepath.Join(root, "weights/part-2.bin")
	data := bytes.Clone(files["weights/part-2.bin"])
	data[12345] ^= 1
	writeFile(t, p, data)
	os.Chtimes(p, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour))
	td3, err := m.Tree(root)
	if err != nil || td3.SHA256 == td1.SHA256 {
		t.Fatalf("a changed byte left the tree digest unchanged (%v)", err)
	}
}

func TestTreeEmpty(t *testing.T) {
	td, err := (*Memo)(nil).Tree(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if td.SHA256 != sha(nil) || td.Size != 0 || td.Files == nil || len(td.Files) != 0 {
		t.Fatalf("empty tree = %+v", td)
	}
}

func TestTreeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, outside, root string)
		want  string
	}{
		{"link outside", func(t *testing.T, outside, root string) {
			os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "l"))
		}, "points outside"},
		{"relative link outside", func(t *testing.T, outside, root string) {
			os.Symlink("../outside/secret", filepath.Join(root, "l"))
		}, "points outside"},
		{"link to dir", func(t *testing.T, outside, root string) {
			os.MkdirAll(filepath.Join(root, "d"), 0o755)
			os.Symlink("d", filepath.Join(root, "l"))
		}, "not a regular file"},
		{"dangling link", func(t *testing.T, outside, root string) {
			os.Symlink("nowhere", filepath.Join(root, "l"))
		}, "cannot be followed"},
		{"fifo", func(t *testing.T, outside, root string) {
			if err := syscall.Mkfifo(filepath.Join(root, "p"), 0o644); err != nil {
				t.Skip(err)
			}
		}, "named pipe"},
		{"not a dir", func(t *testing.T, outside, root string) {}, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			outside, root := filepath.Join(dir, "outside"), filepath.Join(dir, "root")
			writeFile(t, filepath.Join(outside, "secret"), []byte("s"))
			writeFile(t, filepath.Join(root, "ok"), []byte("ok"))
			tc.setup(t, outside, root)
			target := root
			if tc.name == "not a dir" {
				target = filepath.Join(root, "ok")
			}
			_, err := (*Memo)(nil).Tree(target)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	type params struct {
		Zeta  string  `json:"zeta"`
		Alpha float64 `json:"alpha"`
		Inner map[string]any
	}
	for _, tc := range []struct {
		in   any
		want string
	}{
		{map[string]int{"b": 1, "a": 2}, `{"a":2,"b":1}`},
		{params{Zeta: "<&>", Alpha: 0.1, Inner: map[string]any{"y": []int{3, 1}, "x": nil}},
			`{"Inner":{"x":null,"y":[3,1]},"alpha":0.1,"zeta":"<&>"}`},
		{1e21, `1e+21`},
		{[]any{int64(1) << 60, 1.5, "ü"}, `[1152921504606846976,1.5,"ü"]`},
	} {
		got, err := Canonical(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("Canonical(%#v) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if _, err := Canonical(func() {}); err == nil {
		t.Error("Canonical of a func succeeded")
	}
}

func TestKey(t *testing.T) {
	k1, err := Key("quantize", 1, map[string]any{"type": "Q4_K_M", "imatrix": true})
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := Key("quantize", 1, map[string]any{"imatrix": true, "type": "Q4_K_M"})
	k3, _ := Key("quantize", 1, map[string]any{"imatrix": true, "type": "Q5_K_M"})
	if k1 != k2 {
		t.Error("key depends on map order")
	}
	if k1 == k3 {
		t.Error("key ignores a param")
	}
	if k1 != sha([]byte(`["quantize",1,{"imatrix":true,"type":"Q4_K_M"}]`)) {
		t.Error("key is not the sha256 of the canonical array")
	}
	if len(k1) != 64 {
		t.Errorf("key %q is not 64 hex digits", k1)
	}
}

func BenchmarkFile(b *testing.B) {
	p := filepath.Join(b.TempDir(), "f")
	data := randomBytes(256<<20, 8)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := File(p); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFileRefusesFIFO: hashing a path that is a FIFO (a data file swapped
// for one, say) is an error at once, with and without a memo, not a wait
// for a writer that never comes.
func TestFileRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "eval.txt")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	memo, err := OpenMemo("")
	if err != nil {
		t.Fatal(err)
	}
	for name, hash := range map[string]func() error{
		"File":      func() error { _, _, err := File(fifo); return err },
		"memo.hash": func() error { return memo.hashAndRemember(fifo).err },
	} {
		done := make(chan error, 1)
		go func() { done <- hash() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "named pipe") {
				t.Errorf("%s(FIFO) = %v, want a named-pipe error", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s(FIFO) blocked", name)
		}
	}
}
