//go:build unix

package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Only a regular file, or nothing, is replaced: a FIFO, a link to one, or
// a folder stays as it was and the error names the path. (As root, a
// device such as /dev/null is the same case.)
func TestWriteReplacesOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "folder")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		fifo:   fifo + " is a named pipe (FIFO), not a regular file",
		link:   link + " links to a named pipe (FIFO), not a regular file",
		folder: folder + " is a folder, not a regular file",
	} {
		err := Write(path, []byte("new"), 0o644)
		var nr *NotRegularError
		if !errors.As(err, &nr) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q", filepath.Base(path), err, want)
		}
		if err := CheckReplaceable(path); err == nil {
			t.Errorf("%s: CheckReplaceable passed", filepath.Base(path))
		}
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", st.Mode(), err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", st.Mode(), err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 {
		t.Errorf("left %d entries behind, want the 3 made here", len(ents))
	}
	// A regular file and a missing one are written as always.
	regular := filepath.Join(dir, "regular")
	for range 2 {
		if err := Write(regular, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
