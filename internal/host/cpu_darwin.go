package host

import "golang.org/x/sys/unix"

// cpuModel is the brand string macOS reports ("Apple M3 Max").
func cpuModel() string {
	s, err := unix.Sysctl("machdep.cpu.brand_string")
	if err != nil {
		return ""
	}
	return s
}
