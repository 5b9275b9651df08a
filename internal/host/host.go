// Package host describes the machine edgepipe runs on, for measurements
// that are only true of it: which machine it is (so a measurement taken on
// one host is never reused as another's) and how fast it streams memory
// (the bound on decode speed that the bench step compares against).
package host

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
)

// Identity names this host for cache keys and manifests: operating
// system, architecture, CPU model and logical core count, e.g.
// "linux/amd64; Intel(R) Xeon(R) Processor; 2 cores". Two machines with
// the same identity are assumed to measure alike; what it leaves out
// (memory speed, load from other work) is why measurements carry the
// bandwidth probed at the same time. It is read once per process: every bench step's cache key asks for it.
func Identity() string { return identity() }

var identity = sync.OnceValue(func() string {
	model := cpuModel()
	if model == "" {
		model = "unknown CPU"
	}
	id := fmt.Sprintf("%s/%s; %s; %d cores", runtime.GOOS, runtime.GOARCH, strings.Join(strings.Fields(model), " "), runtime.NumCPU())
	if label := strings.TrimSpace(os.Getenv(LabelEnv)); label != "" {
		id += "; " + label
	}
	return id
})

// LabelEnv names a machine beyond what Identity reads: two machines of one
// CPU model that measure differently (other memory, other cooling) get
// different labels, so a remote cache never hands one the other's
// measurements. Tests use it to play a second host.
const LabelEnv = "EDGEPIPE_HOST_LABEL"
