//go:build !linux

package digest

import (
	"errors"
	"os"
)

const mmapMinBytes = 1 << 62

var errNoMmap = errors.New("file cannot be memory-mapped")

// hashMapped is Linux-only (MADV_POPULATE_READ); elsewhere files are read.
func hashMapped(*os.File, int64, func(int64)) (string, int64, error) {
	return "", 0, errNoMmap
}
