// Package toolchains holds the pinned lock files of edgepipe's Python
// toolchains (and the requirement inputs they were compiled from), embedded
// so that the binary installs exactly what was reviewed in the repository.
package toolchains

import "embed"

// Files holds NAME.in and NAME.lock for each Python toolchain.
//
//go:embed *.in *.lock
var Files embed.FS
