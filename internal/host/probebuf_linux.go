package host

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// probeBuffer maps words of anonymous memory in huge pages where the
// kernel has them: filling a 1 GiB buffer page by 4 KiB page took twice as
// long (262,144 page faults) as the passes it prepares, and it is time
// edgepipe spends inside a bench step that the user's own runtime never
// would (issue 18). The mapping is returned to the system at once by free,
// not left to the garbage collector while the runtime loads the model.
func probeBuffer(words int64) (buf []uint64, free func()) {
	b, err := unix.Mmap(-1, 0, int(words*8), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]uint64, words), func() {}
	}
	// Advice only: without transparent huge pages the probe still works,
	// as slowly as before.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), words), func() { _ = unix.Munmap(b) }
}
