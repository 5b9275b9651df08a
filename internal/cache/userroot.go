package cache

import (
	"fmt"
	"os"
	"path/filepath"
)

// UserRoot is the cache folder edgepipe uses when none is given (no
// --cache-dir, no EDGEPIPE_CACHE): $XDG_CACHE_HOME/edgepipe, else
// $HOME/.cache/edgepipe. getenv reads the environment (os.Getenv, or the
// CLI's own), so every caller agrees with `edgepipe run` on where it is.
func UserRoot(getenv func(string) string) (string, error) {
	if x := getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "edgepipe"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("no home folder for the edgepipe cache: %w", err)
		}
	}
	return filepath.Join(home, ".cache", "edgepipe"), nil
}

// Root is the cache folder edgepipe uses without --cache-dir:
// EDGEPIPE_CACHE, else UserRoot. Tests, benchmarks and test servers that
// find the toolchains the CLI installed read it here, so they agree with
// the CLI on every platform (os.UserCacheDir does not: it is
// ~/Library/Caches on macOS).
func Root(getenv func(string) string) (string, error) {
	if c := getenv("EDGEPIPE_CACHE"); c != "" {
		return c, nil
	}
	return UserRoot(getenv)
}
