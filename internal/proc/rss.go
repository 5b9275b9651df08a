package proc

import (
	"os"
	"runtime"
	"syscall"
)

// maxRSS is a waited process's ru_maxrss in bytes (Linux reports KiB,
// macOS bytes); 0 where the platform gives none.
func maxRSS(state *os.ProcessState) int64 {
	ru, ok := state.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) * 1024
}
