package atomicfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// leftovers lists what is in dir besides the names given.
func leftovers(t *testing.T, dir string, want ...string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		keep := false
		for _, w := range want {
			keep = keep || e.Name() == w
		}
		if !keep {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	for _, tc := range []struct {
		data string
		perm os.FileMode
	}{
		{"first", 0o644},
		{"the second, longer content", 0o600}, // replaces, and takes its own mode
		{"", 0o640},
	} {
		if err := Write(path, []byte(tc.data), tc.perm); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != tc.data {
			t.Errorf("content %q (%v), want %q", got, err, tc.data)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != tc.perm {
			t.Errorf("mode %v, want %v (not narrowed by the umask)", fi.Mode().Perm(), tc.perm)
		}
	}
	if extra := leftovers(t, dir, "f.json"); extra != nil {
		t.Errorf("temporary files left: %v", extra)
	}
}

// A write that fails leaves the old content and no temporary file.
func TestWriteFuncFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := Write(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("the archive broke")
	var tmpName string
	err := WriteFunc(path, 0o644, func(w io.Writer) error {
		tmpName = w.(*os.File).Name()
		if _, err := w.Write([]byte("half of the new")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want fill's", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("content %q, want the old", got)
	}
	if extra := leftovers(t, dir, "f"); extra != nil {
		t.Errorf("temporary files left: %v", extra)
	}
	// The temp file sits beside the target and names its writer's pid, so
	// a cleaner can tell a live writer's from a dead one's.
	if filepath.Dir(tmpName) != dir || !strings.HasPrefix(filepath.Base(tmpName), fmt.Sprintf(".f.tmp-%d-", os.Getpid())) {
		t.Errorf("temp file %s", tmpName)
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Error("writing into a missing folder succeeded")
	}
	// A folder in the way: the rename fails and the temp file goes.
	if err := os.Mkdir(filepath.Join(dir, "taken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "taken", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, "taken"), []byte("x"), 0o644); err == nil {
		t.Error("replacing a folder succeeded")
	}
	if extra := leftovers(t, dir, "taken"); extra != nil {
		t.Errorf("temporary files left: %v", extra)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("syncing a missing folder succeeded")
	}
}

func TestWriteMkdir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "report.md")
	if err := WriteMkdir(path, []byte("# r"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "# r" {
		t.Errorf("content %q", got)
	}
	// A file where a folder belongs.
	if err := WriteMkdir(filepath.Join(path, "x"), nil, 0o644); err == nil {
		t.Error("a path under a file succeeded")
	}
}

// Readers racing a writer see one content or the other whole, never an
// empty or mixed file.
func TestWriteIsAtomicForReaders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	a, b := bytes.Repeat([]byte("a"), 64<<10), bytes.Repeat([]byte("b"), 64<<10)
	if err := Write(path, a, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var bad []string
	var mu sync.Mutex
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				got, err := os.ReadFile(path)
				if err != nil || (!bytes.Equal(got, a) && !bytes.Equal(got, b)) {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%d bytes, %v", len(got), err))
					mu.Unlock()
				}
			}
		}()
	}
	for i := range 50 {
		data := a
		if i%2 == 0 {
			data = b
		}
		if err := Write(path, data, 0o644); err != nil {
			t.Error(err)
			break
		}
	}
	close(done)
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("%d reads saw a partial file, e.g. %s", len(bad), bad[0])
	}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestCopy(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.bin")
	data := bytes.Repeat([]byte("0123456789"), (copyBuffer/10)+7) // more than one buffer
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "out", "sub", "copy.bin")
	gotSum, n, err := Copy(dst, src, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if gotSum != sum(data) || n != int64(len(data)) {
		t.Errorf("sum %s size %d, want %s %d", gotSum, n, sum(data), len(data))
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Error("the copy differs from the original")
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o644&^umask() {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	// A copy, not a link: editing it leaves the original.
	if err := os.WriteFile(dst, []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(src); !bytes.Equal(got, data) {
		t.Error("editing the copy changed the original")
	}

	// The destination must be new: an existing file is left as it was.
	if _, _, err := Copy(dst, src, 0o644); !errors.Is(err, os.ErrExist) {
		t.Errorf("copy over an existing file: %v", err)
	}
	if got, _ := os.ReadFile(dst); string(got) != "edited" {
		t.Errorf("the existing file was changed: %q", got)
	}
	if _, _, err := Copy(filepath.Join(dir, "x"), filepath.Join(dir, "missing"), 0o644); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("copy of a missing file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); !os.IsNotExist(err) {
		t.Error("a failed copy left its destination")
	}
}

func umask() os.FileMode {
	p := filepath.Join(os.TempDir(), fmt.Sprintf("umask-probe-%d", os.Getpid()))
	defer os.Remove(p)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o777)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, _ := f.Stat()
	return 0o777 &^ fi.Mode().Perm()
}

type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// A copy whose source fails midway removes what it wrote and says how
// far it got.
func TestCopyFromFailure(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "copy")
	boom := errors.New("connection reset")
	_, n, err := CopyFrom(dst, &failingReader{r: strings.NewReader("twelve bytes"), err: boom}, 0o644)
	if !errors.Is(err, boom) || n != 12 {
		t.Errorf("n %d, err %v; want 12 bytes then the reader's error", n, err)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Error("the partial copy was left")
	}
}

func TestStartWriteback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("dirty pages"), 0o644); err != nil {
		t.Fatal(err)
	}
	StartWriteback(path)
	StartWriteback(filepath.Join(t.TempDir(), "missing")) // no error to report, no panic
	if got, _ := os.ReadFile(path); string(got) != "dirty pages" {
		t.Errorf("content %q", got)
	}
}
