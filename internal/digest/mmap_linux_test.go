package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// A file over several mapping windows, whose size is no multiple of a
// window or a page, hashes to the same digest as crypto/sha256 over its
// bytes, and progress ends at its size.
func TestFileMappedMatchesSHA256(t *testing.T) {
	data := make([]byte, 2*mmapWindow+12345)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	path := filepath.Join(t.TempDir(), "w.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var last int64
	sum, n, err := hashMapped(f, int64(len(data)), func(done int64) { last = done })
	if err != nil {
		t.Fatal(err)
	}
	if sum != hex.EncodeToString(want[:]) || n != int64(len(data)) || last != n {
		t.Fatalf("hashMapped = %s, %d (progress %d); want %x, %d", sum, n, last, want, len(data))
	}
	if s, _, err := File(path); err != nil || s != sum {
		t.Fatalf("File = %s, %v; want %s", s, err, sum)
	}
}

// A file truncated after it was stat'ed faults past its new end; that must be
// an error, not a crash of the whole run.
func TestFileMappedTruncatedIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.bin")
	size := int64(3 * mmapWindow)
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Truncate(path, mmapWindow/2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := hashMapped(f, size, nil); err == nil {
		t.Fatal("hashMapped of a truncated file gave no error")
	}
}
