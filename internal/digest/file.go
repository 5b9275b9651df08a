// Package digest computes sha256 digests of files and directory trees and
// memoizes them by file identity, so inputs that did not change are never
// read again.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
)

const (
	// readBufSize is large so that the per-read syscall overhead stays small
	// next to the SHA-NI block function.
	readBufSize = 1 << 20
	// pipelineBufs buffers let one goroutine read ahead while another hashes,
	// so the kernel's copy into user space (a sixth of the time of reading
	// and hashing in turn, measured here) overlaps the hashing instead of
	// adding to it.
	pipelineBufs = 3
)

type bufSet [pipelineBufs][]byte

var bufPool = sync.Pool{New: func() any {
	var s bufSet
	for i := range s {
		s[i] = make([]byte, readBufSize)
	}
	return &s
}}

// mappedBytes counts the bytes this process hashed through mappings.
var mappedBytes atomic.Int64

// MappedBytes is how many file bytes this process has hashed through
// memory mappings. Reading a mapping is no read(2), so /proc/PID/io's
// rchar does not count them: whoever measures what a run read (the
// noop-rerun benchmark) adds these.
func MappedBytes() int64 { return mappedBytes.Load() }

// File returns the sha256 (lowercase hex) and size of the file at path.
func File(path string) (sha256hex string, size int64, err error) {
	// A FIFO or device is refused, never waited on or read forever.
	f, st, err := boundedfile.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	sum, n, err := hashOpenFile(f, st, nil)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", path, err)
	}
	return sum, n, nil
}

// hashOpenFile hashes an open file: through mappings when it is a regular
// file large enough for that to pay (hashMapped), else by reading it.
// progress, when set, is called with the bytes hashed so far.
func hashOpenFile(f *os.File, st os.FileInfo, progress func(done int64)) (string, int64, error) {
	if st.Mode().IsRegular() && st.Size() >= mmapMinBytes {
		sum, n, err := hashMapped(f, st.Size(), progress)
		if err != errNoMmap {
			return sum, n, err
		}
	}
	var r io.Reader = f
	if progress != nil {
		r = &countingReader{r: f, fn: progress}
	}
	return hashReader(r)
}

type countingReader struct {
	r    io.Reader
	done int64
	fn   func(done int64)
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.done += int64(n)
	if n > 0 {
		c.fn(c.done)
	}
	return n, err
}

type chunk struct {
	b   []byte
	err error
}

// hashReader reads r to the end, reading ahead on a second goroutine.
// It deliberately avoids io.Copy: *os.File's WriteTo would pick a 32 KiB
// buffer and read and hash in turn.
func hashReader(r io.Reader) (string, int64, error) {
	bufs := bufPool.Get().(*bufSet)
	defer bufPool.Put(bufs)

	// free and full both have room for every buffer, so neither side ever
	// blocks on a send; the hashing side always drains full, so the reader
	// always finishes.
	free := make(chan []byte, pipelineBufs)
	full := make(chan chunk, pipelineBufs)
	for _, b := range bufs {
		free <- b
	}
	go func() {
		defer close(full)
		for {
			buf := <-free
			n, err := r.Read(buf)
			if n > 0 {
				full <- chunk{b: buf[:n]}
			} else {
				free <- buf
			}
			if err == io.EOF {
				return
			}
			if err != nil {
				full <- chunk{err: err}
				return
			}
		}
	}()

	h := sha256.New()
	var total int64
	var readErr error
	for c := range full {
		if c.err != nil {
			readErr = c.err
			continue
		}
		h.Write(c.b)
		total += int64(len(c.b))
		free <- c.b[:cap(c.b)]
	}
	if readErr != nil {
		return "", total, readErr
	}
	return hex.EncodeToString(h.Sum(nil)), total, nil
}
