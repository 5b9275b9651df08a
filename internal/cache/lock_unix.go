//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Lock takes key's exclusive lock, shared by every process using this cache
// root, waiting until it is free or ctx is done. Holders in the same
// process exclude each other too. Call release once done; it is safe to
// call more than once.
func (c *Cache) Lock(ctx context.Context, key string) (release func(), err error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	delay := 2 * time.Millisecond
	for {
		release, ok, err := c.TryLock(key)
		if err != nil {
			return nil, err
		}
		if ok {
			return release, nil
		}
		// flock cannot wait and also watch ctx, so poll with backoff.
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("wait for cache lock on %s: %w", key, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}

// TryLock takes key's lock if it is free and reports whether it did.
func (c *Cache) TryLock(key string) (release func(), ok bool, err error) {
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	path := filepath.Join(c.root, locksDir, key+".lock")
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, false, fmt.Errorf("lock %s: %w", key, err)
		}
		fd := int(f.Fd())
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		for errors.Is(err, unix.EINTR) {
			err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		}
		if errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, false, nil
		}
		if err != nil {
			f.Close()
			return nil, false, fmt.Errorf("lock %s: %w", key, err)
		}
		// GC deletes lock files (holding the lock). If it deleted this one
		// after we opened it, we hold a lock on a file nobody else can find
		// any more; open the path again.
		var held, now unix.Stat_t
		if unix.Fstat(fd, &held) != nil || unix.Stat(path, &now) != nil ||
			held.Dev != now.Dev || held.Ino != now.Ino {
			f.Close()
			continue
		}
		var once sync.Once
		return func() { once.Do(func() { f.Close() }) }, true, nil
	}
}

// removeLockFile deletes key's lock file; the caller holds the lock.
func (c *Cache) removeLockFile(key string) {
	os.Remove(filepath.Join(c.root, locksDir, key+".lock"))
}

// processGone reports whether no process with this pid exists. EPERM means
// one exists that we may not signal.
func processGone(pid int) bool {
	return errors.Is(unix.Kill(pid, 0), unix.ESRCH)
}

// holdDir takes a shared lock on a temp or scratch dir for as long as its
// builder lives: the kernel drops it when the process dies, so GC can tell
// a dir in use (however old, whatever its pid) from an abandoned one.
func (c *Cache) holdDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	c.heldDirs.Store(dir, f)
	return nil
}

// releaseDir drops holdDir's lock.
func (c *Cache) releaseDir(dir string) {
	if f, ok := c.heldDirs.LoadAndDelete(dir); ok {
		f.(*os.File).Close()
	}
}

// dirInUse reports whether some process holds dir (holdDir).
func dirInUse(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}
