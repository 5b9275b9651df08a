//go:build !linux

package toolchain

import (
	"os/exec"
	"strings"
)

// cpuFeatures identifies the CPU by its brand string where sysctl has one
// (macOS); elsewhere the OS and architecture alone name the build.
func cpuFeatures() []string {
	out, err := exec.Command("sysctl", "-n", "machdep.cpu.brand_string").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}
