package boundedfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("hello"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(small, link)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}

	if b, err := Read(small, 5); err != nil || string(b) != "hello" {
		t.Fatalf("Read(small, 5) = %q, %v", b, err)
	}
	if b, err := Read(link, 5); err != nil || string(b) != "hello" {
		t.Fatalf("Read(link) = %q, %v: links are followed", b, err)
	}
	var big *TooLargeError
	if _, err := Read(small, 4); !errors.As(err, &big) {
		t.Errorf("Read(small, 4) = %v, want TooLargeError", err)
	}
	var notRegular *NotRegularError
	for _, p := range []string{"/dev/zero", dir, fifo} {
		done := make(chan error, 1)
		go func() { _, err := Read(p, 1<<20); done <- err }()
		select {
		case err := <-done:
			if !errors.As(err, &notRegular) {
				t.Errorf("Read(%s) = %v, want NotRegularError", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Read(%s) blocked", p)
		}
	}
	if _, err := ReadNoFollow(link, 5); !errors.As(err, &notRegular) {
		t.Errorf("ReadNoFollow(link) = %v, want NotRegularError", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 5); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read(missing) = %v, want ErrNotExist", err)
	}
}

// TestOpen: Open hands back a regular file to stream, and refuses a FIFO
// without waiting for a writer, a device and a folder.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("hello"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(small, link)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	f, fi, err := Open(link)
	if err != nil || fi.Size() != 5 {
		t.Fatalf("Open(link) = %v, %v", fi, err)
	}
	b := make([]byte, 5)
	if _, err := f.Read(b); err != nil || string(b) != "hello" {
		t.Errorf("read %q, %v", b, err)
	}
	f.Close()
	var notRegular *NotRegularError
	for _, p := range []string{"/dev/zero", dir, fifo} {
		done := make(chan error, 1)
		go func() {
			f, _, err := Open(p)
			if f != nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.As(err, &notRegular) {
				t.Errorf("Open(%s) = %v, want NotRegularError", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(%s) blocked", p)
		}
	}
	if _, _, err := OpenNoFollow(link); !errors.As(err, &notRegular) {
		t.Errorf("OpenNoFollow(link) = %v, want NotRegularError", err)
	}
}
