//go:build !linux

package host

// probeBuffer is an ordinary allocation where edgepipe does not map huge
// pages itself.
func probeBuffer(words int64) (buf []uint64, free func()) {
	return make([]uint64, words), func() {}
}
