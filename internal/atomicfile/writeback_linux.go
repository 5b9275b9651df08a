package atomicfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// StartWriteback asks the kernel to begin writing path's dirty pages to
// disk now and returns without waiting for them. A later fsync then waits
// only for what is still in flight: a caller that has CPU work to do on
// the same bytes (hashing them) overlaps the disk with it instead of
// paying for both one after the other. Errors are not reported: the
// fsync that follows is what makes the file durable, and it reports them.
func StartWriteback(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	startWriteback(f)
}

func startWriteback(f *os.File) {
	_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
