// Package atomicfile writes files that appear whole or not at all: a reader,
// a concurrent writer or a crash at any moment sees the old content or the
// new, never part of either. Copies are new files (never a replaced one)
// hashed while they are written, so a caller learns what it copied without
// reading it again.
package atomicfile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// NotRegularError is a write refused because its path holds something
// other than a regular file: a device, a named pipe, a socket or a folder,
// or a link to one. Renaming a new file over it would destroy it (as root,
// `plan --bundle /dev/null` would replace /dev/null).
type NotRegularError struct {
	Path string
	What string // "a named pipe (FIFO)", "a character device", ...
	Link bool   // Path is a symbolic link to it
}

func (e *NotRegularError) Error() string {
	is := "is"
	if e.Link {
		is = "links to"
	}
	return fmt.Sprintf("%s %s %s, not a regular file: edgepipe writes its output over regular files only; give the path of a new or regular file", e.Path, is, e.What)
}

// CheckReplaceable refuses (*NotRegularError) to write path when it holds
// anything but a regular file, following links; a path that does not exist
// yet is fine. Every writer of a user-named output goes through it (Write
// and WriteFunc do): callers that do hours of work first call it up front.
func CheckReplaceable(path string) error {
	st, err := os.Stat(path)
	if err != nil || st.Mode().IsRegular() {
		// Missing is fine; any other error is the write's to report.
		return nil
	}
	lst, err := os.Lstat(path)
	link := err == nil && lst.Mode()&fs.ModeSymlink != 0
	return &NotRegularError{Path: path, What: describeMode(st.Mode()), Link: link}
}

func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}

// Write replaces path with data so that readers, concurrent
// writers and a crash at any moment see either the old or the new content.
// The temp name carries our pid so a cleaner can tell a dead writer's
// leftovers from a live one's.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc is Write for content streamed by fill (an archive, say), which
// must not be held in memory whole. Only a regular file (or nothing) at
// path is replaced: anything else is a *NotRegularError, checked before
// and again just before the rename.
func WriteFunc(path string, perm os.FileMode, fill func(io.Writer) error) (err error) {
	if err := CheckReplaceable(path); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, fmt.Sprintf(".%s.tmp-%d-*", filepath.Base(path), os.Getpid()))
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = fill(f); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = CheckReplaceable(path); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes a rename, create or remove inside dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteMkdir is Write that makes path's folder first.
func WriteMkdir(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return Write(path, data, perm)
}

// copyBuffer is large enough that a copy costs few system calls (io.Copy's
// 32 KiB made a published model's copy several thousand of them).
const copyBuffer = 1 << 20

// Copy copies src into dst, a file that must not exist yet (its folder is
// made), and returns the sha256 (hex) and size of what it wrote. Copies, not
// links: a user editing the copy must never change the original.
func Copy(dst, src string, perm os.FileMode) (sum string, n int64, err error) {
	in, err := os.Open(src)
	if err != nil {
		return "", 0, err
	}
	defer in.Close()
	return CopyFrom(dst, in, perm)
}

// CopyFrom is Copy from an open reader.
func CopyFrom(dst string, src io.Reader, perm os.FileMode) (sum string, n int64, err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", 0, err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	n, err = io.CopyBuffer(io.MultiWriter(out, h), src, make([]byte, copyBuffer))
	if err == nil {
		// Whoever makes the copy durable fsyncs it later; the disk can
		// start now, while the next file is copied.
		startWriteback(out)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
