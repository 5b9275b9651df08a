//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package cache

import (
	"context"
	"fmt"
	"runtime"
)

func (c *Cache) Lock(ctx context.Context, key string) (func(), error) {
	return nil, fmt.Errorf("lock %s: the cache needs file locks, which edgepipe does not support on %s; run on Linux or macOS", key, runtime.GOOS)
}

func (c *Cache) TryLock(key string) (func(), bool, error) {
	_, err := c.Lock(context.Background(), key)
	return nil, false, err
}

func (c *Cache) removeLockFile(string) {}

// processGone assumes the process lives: better to keep a stale temp dir
// than to delete one in use.
func processGone(int) bool { return false }

func (c *Cache) holdDir(string) error { return nil }
func (c *Cache) releaseDir(string)    {}
func dirInUse(string) bool            { return false }
