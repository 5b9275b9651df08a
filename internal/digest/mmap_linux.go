package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

const (
	// mmapWindow is how much of the file is mapped at a time. Mapping
	// windows, not the whole file, keeps the pages this process maps (its
	// RSS, which the executor measures) to a few windows whatever the
	// model's size.
	mmapWindow = 16 << 20
	// mmapAhead windows are mapped and populated ahead of the hashing.
	mmapAhead = 2
	// mmapMinBytes: under this, a read into a pooled buffer is cheaper than
	// setting up and tearing down a mapping.
	mmapMinBytes = 4 << 20
	// madvPopulateRead is MADV_POPULATE_READ (Linux 5.14): fault a range's
	// pages in without touching them from user space.
	madvPopulateRead = 22
)

// errNoMmap means the file cannot be mapped (a filesystem without mmap, a
// FUSE file, an address-space limit): the caller reads it instead.
var errNoMmap = errors.New("file cannot be memory-mapped")

type window struct {
	b   []byte
	err error
}

// hashMapped hashes size bytes of f through read-only mappings. Measured on
// a 2 GiB file in the page cache (see issue 18 and bench/hash.go), reading
// into a buffer costs 1.6-1.8 CPU-s of which 0.4-0.6 s is the kernel's copy
// into user space and the hand-off between goroutines; hashing mapped pages
// costs 1.5 CPU-s, and the remaining page-fault work runs on a second
// goroutine that maps and populates the next windows (MADV_POPULATE_READ)
// while this one hashes, so the hashing core does little but SHA-NI rounds.
func hashMapped(f *os.File, size int64, progress func(done int64)) (sum string, n int64, err error) {
	// A file truncated under the mapping faults (SIGBUS) on the first page
	// past its new end. Turn that into an error rather than a crash; the
	// caller's stat after hashing sees the change and hashes again.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the file changed while it was read (%v)", r)
		}
	}()

	first, err := unix.Mmap(int(f.Fd()), 0, int(min(size, mmapWindow)), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return "", 0, errNoMmap
	}
	windows := make(chan window, mmapAhead)
	stop := make(chan struct{})
	go mapAhead(f, size, first, windows, stop)
	defer func() {
		close(stop)
		for w := range windows { // unmap what was mapped ahead and not hashed
			if w.b != nil {
				_ = unix.Munmap(w.b)
			}
		}
	}()

	h := sha256.New()
	for w := range windows {
		if w.err != nil {
			return "", n, w.err
		}
		h.Write(w.b)
		n += int64(len(w.b))
		mappedBytes.Add(int64(len(w.b)))
		if err := unix.Munmap(w.b); err != nil {
			return "", n, fmt.Errorf("unmap: %w", err)
		}
		if progress != nil {
			progress(n)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// mapAhead maps the file window by window and faults each one in before
// handing it over, so the hashing goroutine rarely takes a page fault. It
// always closes windows.
func mapAhead(f *os.File, size int64, first []byte, windows chan<- window, stop <-chan struct{}) {
	defer close(windows)
	send := func(w window) bool {
		select {
		case windows <- w:
			return true
		case <-stop:
			if w.b != nil {
				_ = unix.Munmap(w.b)
			}
			return false
		}
	}
	for off := int64(0); off < size; off += mmapWindow {
		b := first
		if off > 0 {
			var err error
			b, err = unix.Mmap(int(f.Fd()), off, int(min(size-off, mmapWindow)), unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				send(window{err: fmt.Errorf("map bytes %d-%d: %w", off, off+mmapWindow, err)})
				return
			}
		}
		// Best effort: an older kernel (EINVAL) or a range past a
		// truncated end (EFAULT) leaves the faults to the hashing side,
		// which turns a real problem into an error there.
		_ = unix.Madvise(b, madvPopulateRead)
		if !send(window{b: b}) {
			return
		}
	}
}
