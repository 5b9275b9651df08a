//go:build linux || darwin || freebsd || openbsd || dragonfly

package remotecache

import "golang.org/x/sys/unix"

// freeBytes is the space an unprivileged writer may still use in the file
// system that holds dir.
func freeBytes(dir string) (int64, bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false, err
	}
	return int64(st.Bavail) * int64(st.Bsize), true, nil
}
