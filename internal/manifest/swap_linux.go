package manifest

import (
	"errors"

	"golang.org/x/sys/unix"
)

func swapDirs(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	// Old kernels lack renameat2 (ENOSYS); some file systems lack the flag (EINVAL).
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		return errSwapUnsupported
	}
	return err
}
