package steps

import (
	"slices"
	"testing"
)

func TestThreadEnv(t *testing.T) {
	got := ThreadEnv(2, []string{"PATH=/bin"}, false)
	for _, want := range []string{"EDGEPIPE_THREADS=2", "OMP_NUM_THREADS=2", "MKL_NUM_THREADS=2", "OMP_WAIT_POLICY=PASSIVE"} {
		if !slices.Contains(got, want) {
			t.Errorf("ThreadEnv(2) = %v, lacks %s", got, want)
		}
	}
	// A policy the user chose is theirs.
	if got := ThreadEnv(1, []string{"OMP_WAIT_POLICY=ACTIVE"}, false); slices.Contains(got, "OMP_WAIT_POLICY=PASSIVE") {
		t.Errorf("ThreadEnv overrode the user's OMP_WAIT_POLICY: %v", got)
	}
	if got := ThreadEnv(0, nil, false); !slices.Contains(got, "OMP_NUM_THREADS=1") {
		t.Errorf("ThreadEnv(0) = %v, want at least one thread", got)
	}
	// A step measuring speed keeps the runtime's own policy.
	if got := ThreadEnv(2, nil, true); slices.ContainsFunc(got, func(kv string) bool { return kv == "OMP_WAIT_POLICY=PASSIVE" }) {
		t.Errorf("ThreadEnv for a measuring step set PASSIVE: %v", got)
	}
}
