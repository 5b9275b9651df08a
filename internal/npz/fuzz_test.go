package npz

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// FuzzNPZ: no input panics the .npz reader, and what it accepts is
// consistent: no array over the cap, and an accepted array's data stream
// gives at most the bytes its header says.
func FuzzNPZ(f *testing.F) {
	for _, p := range []string{"testdata/compressed.npz", "testdata/pickle.npz", "../../data/digits-test.npz"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, 10)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, classes int) {
		const limit = 1 << 20
		z, err := Read(bytes.NewReader(b), int64(len(b)), []string{"images", "labels"}, limit)
		if err != nil {
			return
		}
		var total int64
		for _, a := range z.Arrays {
			if a.DataBytes < 0 || a.DataBytes != a.Elems*a.ItemSize {
				t.Fatalf("%s: %d bytes for %v of %d", a.Name, a.DataBytes, a.Shape, a.ItemSize)
			}
			total += a.DataBytes
			if rc, err := a.Data(); err == nil {
				n, _ := io.Copy(io.Discard, io.LimitReader(rc, limit+1))
				rc.Close()
				if n > a.DataBytes {
					t.Fatalf("%s: %d bytes of data, header says %d", a.Name, n, a.DataBytes)
				}
			}
		}
		if total > limit {
			t.Fatalf("%d bytes accepted over the %d cap", total, limit)
		}
		checkImageSet(z, classes%2000)
	})
}
