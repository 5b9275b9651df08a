//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package manifest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive flock on the folder itself, so no lock file is
// left behind; the kernel releases it when the holder dies.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	fd := int(d.Fd())
	delay := time.Millisecond
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { d.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			d.Close()
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		// Publishers hold the lock only for a few renames: poll, so the
		// wait can be cancelled.
		select {
		case <-ctx.Done():
			d.Close()
			return nil, fmt.Errorf("lock %s: %w", dir, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// pidAlive reports whether a process with this id exists (maybe owned by
// another user, which EPERM reveals).
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
