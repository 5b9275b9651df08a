package toolchain

import (
	"os"
	"strings"
)

// cpuFeatures returns the CPU's feature flags ("flags" on x86, "Features"
// on ARM) from /proc/cpuinfo, the set -march=native compiles for.
func cpuFeatures() []string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if k := strings.TrimSpace(key); k == "flags" || k == "Features" {
			return strings.Fields(val)
		}
	}
	return nil
}
