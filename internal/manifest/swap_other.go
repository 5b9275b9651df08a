//go:build !linux && !darwin

package manifest

func swapDirs(a, b string) error { return errSwapUnsupported }
