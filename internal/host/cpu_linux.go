package host

import (
	"os"
	"strings"
)

// cpuModel reads the CPU's name from /proc/cpuinfo: "model name" on x86,
// "Model" or "Hardware" on ARM boards, the part number as a last resort.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	return cpuModelFrom(string(b))
}

func cpuModelFrom(cpuinfo string) string {
	found := map[string]string{}
	for _, line := range strings.Split(cpuinfo, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if _, seen := found[key]; !seen && val != "" {
			found[key] = val
		}
	}
	for _, k := range []string{"model name", "Model", "Hardware"} {
		if v := found[k]; v != "" {
			return v
		}
	}
	if part := found["CPU part"]; part != "" {
		return "CPU implementer " + found["CPU implementer"] + " part " + part
	}
	return ""
}
