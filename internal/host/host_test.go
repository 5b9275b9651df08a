package host

import (
	"context"
	"math"
	"runtime"
	"strings"
	"testing"
)

func TestIdentityNamesCoresAndArch(t *testing.T) {
	id := Identity()
	for _, want := range []string{runtime.GOOS + "/" + runtime.GOARCH, " cores"} {
		if !strings.Contains(id, want) {
			t.Errorf("Identity() = %q, lacks %q", id, want)
		}
	}
	if Identity() != id {
		t.Error("Identity is not stable")
	}
}

func TestCPUModelFromCpuinfo(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t: fpu\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Processor\n", "Intel(R) Xeon(R) Processor"},
		{"processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n\nModel\t: Raspberry Pi 5 Model B Rev 1.0\n", "Raspberry Pi 5 Model B Rev 1.0"},
		{"processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd42\n", "CPU implementer 0x41 part 0xd42"},
		{"", ""},
	} {
		if got := cpuModelFrom(c.in); got != c.want {
			t.Errorf("cpuModelFrom(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The probe's figure depends on the machine; what must hold anywhere is
// that it is a positive, finite rate over the bytes asked for.
func TestMemoryBandwidthIsPositiveAndFinite(t *testing.T) {
	bw, err := MemoryBandwidth(context.Background(), 16<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !(bw.GBs > 0) || math.IsInf(bw.GBs, 0) {
		t.Fatalf("bandwidth %v GB/s", bw.GBs)
	}
	if bw.Bytes != 16<<20 || bw.Passes != 2 || bw.Readers != runtime.GOMAXPROCS(0) {
		t.Errorf("probe = %+v", bw)
	}
}

func TestMemoryBandwidthRefusesBadArguments(t *testing.T) {
	if _, err := MemoryBandwidth(context.Background(), 1024, 1); err == nil {
		t.Error("1 KiB: want an error")
	}
	if _, err := MemoryBandwidth(context.Background(), 16<<20, 0); err == nil {
		t.Error("0 passes: want an error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MemoryBandwidth(ctx, 16<<20, 1); err == nil {
		t.Error("canceled context: want an error")
	}
}

func TestSumAndSplitCoverEveryWord(t *testing.T) {
	s := make([]uint64, 1003)
	want := uint64(0)
	for i := range s {
		s[i] = uint64(i)
		want += uint64(i)
	}
	got := uint64(0)
	for _, sp := range split(len(s), 7) {
		got += sum(s[sp.lo:sp.hi])
	}
	if got != want {
		t.Errorf("sum over 7 spans = %d, want %d", got, want)
	}
}
