//go:build !linux

package atomicfile

import "os"

// StartWriteback does nothing where the kernel has no sync_file_range:
// the fsync that follows makes the file durable on its own.
func StartWriteback(string) {}

func startWriteback(*os.File) {}
