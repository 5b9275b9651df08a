package host

import (
	"math"
	"testing"

	"golang.org/x/sys/unix"
)

// MemoryGB reads MemTotal, which the kernel also reports through
// sysinfo(2): both must give the same GiB.
func TestMemoryGB(t *testing.T) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Skip(err)
	}
	want := float64(si.Totalram) * float64(si.Unit) / (1 << 30)
	got := MemoryGB()
	if got <= 0 || math.Abs(got-want) > 0.01*want {
		t.Errorf("MemoryGB() = %.3f, sysinfo says %.3f GiB", got, want)
	}
}

// The probe's buffer is usable memory of the size asked for.
func TestProbeBuffer(t *testing.T) {
	buf, free := probeBuffer(1 << 18)
	defer free()
	if len(buf) != 1<<18 {
		t.Fatalf("%d words, want %d", len(buf), 1<<18)
	}
	for i := range buf {
		buf[i] = uint64(i)
	}
	if sum(buf) != uint64(len(buf))*uint64(len(buf)-1)/2 {
		t.Error("the buffer does not hold what was written")
	}
}
