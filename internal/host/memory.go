package host

import (
	"fmt"
	"os"
	"strings"
)

// MemoryGB is the machine's memory in GiB, from /proc/meminfo's MemTotal
// (0 when it cannot tell): the memory weights keep steps running at once
// under it.
func MemoryGB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb)
			return kb / (1 << 20)
		}
	}
	return 0
}
