// Package boundedfile reads files that come from users and downloads
// (recipes, manifests, locks, model configs, weights headers, data sets)
// with a size cap, and only when they are regular files: /dev/zero, a FIFO
// or a 200 MB config.json gets a clear error instead of exhausting memory
// or blocking forever. Every reader of such a file opens it here (Read for
// a whole small file, Open for a header or a stream).
package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Caps for the files edgepipe parses. Real ones are far smaller: a recipe
// is kilobytes, a config.json under 100 KB, a manifest a few hundred KB
// even for a sharded 70B model.
const (
	RecipeLimit    = 4 << 20
	ManifestLimit  = 64 << 20
	LockLimit      = 16 << 20
	ModelJSONLimit = 16 << 20 // config.json, tokenizer_config.json, *.index.json
	ResultLimit    = 16 << 20 // a step's result.json
	SidecarLimit   = 64 << 20 // provenance, signatures, tensor caches
)

// TooLargeError is a file over its cap.
type TooLargeError struct {
	Path  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s, more than such a file can be: check that it is the file you meant", e.Path, size(e.Limit))
}

// NotRegularError is a path that is a directory, device, FIFO or socket
// (or, for ReadNoFollow, a link).
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	what := "not a regular file"
	switch {
	case e.Mode.IsDir():
		what = "a directory, not a file"
	case e.Mode&fs.ModeSymlink != 0:
		what = "a symbolic link, where only a regular file is accepted"
	case e.Mode&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO), not a regular file"
	case e.Mode&fs.ModeDevice != 0:
		what = "a device, not a regular file"
	case e.Mode&fs.ModeSocket != 0:
		what = "a socket, not a regular file"
	}
	return fmt.Sprintf("%s is %s", e.Path, what)
}

// Read reads the regular file at path (links followed) of at most limit
// bytes.
func Read(path string, limit int64) ([]byte, error) { return read(path, limit, true) }

// ReadNoFollow is Read for a path that must not be a link (inside the
// cache, where a link was put there after the fact).
func ReadNoFollow(path string, limit int64) ([]byte, error) {
	return read(path, limit, false)
}

// Open opens the regular file at path (links followed) for reading, and
// returns it with its FileInfo. It is the way to open a file a user or a
// download supplied when the caller reads only part of it (a header) or
// streams it: a FIFO, device, socket or folder is a NotRegularError, and
// opening it never waits for a writer.
func Open(path string) (*os.File, fs.FileInfo, error) { return open(path, true) }

// OpenNoFollow is Open for a path that must not be a link.
func OpenNoFollow(path string) (*os.File, fs.FileInfo, error) { return open(path, false) }

func open(path string, follow bool) (*os.File, fs.FileInfo, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer; the mode is
	// checked on the open file, so a swap between a stat and the open
	// cannot slip a FIFO or device in. On a regular file O_NONBLOCK
	// changes nothing, so the file is returned as opened.
	flags := os.O_RDONLY | syscall.O_NONBLOCK
	if !follow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		if !follow && errors.Is(err, syscall.ELOOP) {
			return nil, nil, &NotRegularError{Path: path, Mode: fs.ModeSymlink}
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &NotRegularError{Path: path, Mode: fi.Mode()}
	}
	return f, fi, nil
}

func read(path string, limit int64, follow bool) ([]byte, error) {
	f, fi, err := open(path, follow)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit { // grew while read
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	return b, nil
}

func size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
