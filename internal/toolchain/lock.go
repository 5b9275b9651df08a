package toolchain

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive advisory lock on path, waiting (until ctx
// ends) while another edgepipe holds it: two installs of one toolchain
// would otherwise both download and build it. The kernel drops the lock
// when the holder dies, so a killed install never blocks the next.
func lockFile(ctx context.Context, path string, progress io.Writer) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	waiting := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if err != unix.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !waiting {
			waiting = true
			fmt.Fprintf(progress, "waiting for another edgepipe to finish installing (%s)\n", path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tryLockFile takes the install lock at path without waiting: an install
// in progress makes removal an error to retry later.
func tryLockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("another edgepipe is installing it; try again when it is done")
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
