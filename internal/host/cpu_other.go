//go:build !linux && !darwin

package host

// cpuModel is unknown here; the identity still names the OS, the
// architecture and the core count.
func cpuModel() string { return "" }
