package edge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// writeSafetensors writes a file of just a header (its length, then the
// JSON) and returns its path.
func writeSafetensors(t *testing.T, length uint64, json []byte) string {
	t.Helper()
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, length)
	b.Write(json)
	p := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// tensorsHeader is a header of small F16 tensors of about size bytes.
func tensorsHeader(size int) ([]byte, int64) {
	var b bytes.Buffer
	b.WriteString("{")
	var n int64
	for b.Len() < size {
		if n > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"model.layers.%d.weight":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]}`, n)
		n++
	}
	b.WriteString("}")
	return b.Bytes(), n * 6
}

// peakHeap runs fn and returns the most heap it saw in use above what
// was in use before, sampled while fn runs with the collector kept eager,
// so that garbage does not count as use.
func peakHeap(fn func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				done <- peak
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	peak := <-done
	if peak < base.HeapAlloc {
		return 0
	}
	return peak - base.HeapAlloc
}

// A header larger than any real checkpoint's is refused with its size,
// unread; one under the limit is decoded a tensor at a time, in a small
// fraction of its size (decoding it whole took about eight times it).
func TestSafetensorsHeaderMemoryIsBounded(t *testing.T) {
	big, _ := tensorsHeader(maxHeaderBytes + 1)
	p := writeSafetensors(t, uint64(len(big)), big)
	big = nil
	if _, err := headerParams(p); err == nil || !strings.Contains(err.Error(), "more than the 16 MiB edgepipe reads") {
		t.Fatalf("a %d-byte header: %v", maxHeaderBytes+1, err)
	}
	// The format's own limit still says it is not safetensors.
	p = writeSafetensors(t, formatHeaderLimit+1, []byte("{}"))
	if _, err := headerParams(p); err == nil || !strings.Contains(err.Error(), "not a safetensors file (header length") {
		t.Fatalf("a header past the format's limit: %v", err)
	}

	hdr, want := tensorsHeader(8 << 20)
	size := len(hdr)
	p = writeSafetensors(t, uint64(size), hdr)
	hdr = nil
	var got int64
	var err error
	peak := peakHeap(func() { got, err = headerParams(p) })
	if err != nil || got != want {
		t.Fatalf("an %d-byte header of real tensors: %d parameters, %v; want %d", size, got, err, want)
	}
	t.Logf("%d-byte header: peak heap %d KiB", size, peak>>10)
	if peak > uint64(size)/2 {
		t.Fatalf("decoding a %d-byte header held %d bytes; want a small fraction of it", size, peak)
	}
}

// The stream decoder keeps the old reader's verdicts on malformed headers.
func TestSafetensorsHeaderRefusesMalformed(t *testing.T) {
	for name, json := range map[string]string{
		"not an object":  `[1,2]`,
		"cut":            `{"w":{"dtype":"F16","shape":[2]}`,
		"trailing data":  `{"w":{"dtype":"F16","shape":[2]}} x`,
		"tensor not obj": `{"w":5}`,
		"bad shape":      `{"w":{"dtype":"F16","shape":[-1]}}`,
	} {
		p := writeSafetensors(t, uint64(len(json)), []byte(json))
		if n, err := headerParams(p); err == nil {
			t.Errorf("%s: %d parameters, no error", name, n)
		}
	}
	// Padding after the object, metadata anywhere, is fine.
	json := `{"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[4,3],"data_offsets":[0,24]}}    `
	p := writeSafetensors(t, uint64(len(json)), []byte(json))
	if n, err := headerParams(p); err != nil || n != 12 {
		t.Errorf("a padded header: %d, %v", n, err)
	}
	// A length past the file's end is refused before reading.
	p = writeSafetensors(t, 1<<20, []byte(`{}`))
	if _, err := headerParams(p); err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("a header length past the end: %v", err)
	}
}
