// Package python holds the small Python helper scripts that step kinds run
// inside a pinned toolchain, embedded so the binary carries the exact bytes
// its cache keys were computed from.
package python

import "embed"

// Scripts holds the helper scripts (*.py) by file name.
//
//go:embed *.py
var Scripts embed.FS
