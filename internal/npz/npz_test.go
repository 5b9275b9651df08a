package npz

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
)

// npy is a .npy member: a version 1.0 header for descr and shape, then
// data.
func npy(descr string, fortran bool, shape []int64, data []byte) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	order := "False"
	if fortran {
		order = "True"
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }", descr, order, tuple)
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(append(b, h...), data...)
}

// rawNpy is a .npy member with the header text given.
func rawNpy(h string) []byte {
	return append([]byte{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, byte(len(h)), byte(len(h) >> 8)}, h...)
}

type member struct {
	name string
	data []byte
	// method and size, when set, are written raw: the compressed bytes
	// are data deflated (or stored), the sizes claimed as given.
	method uint16
	claim  uint64
}

func writeNPZ(t *testing.T, path string, members ...member) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		if m.claim == 0 && m.method == 0 {
			w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: zip.Deflate})
			if err != nil {
				t.Fatal(err)
			}
			w.Write(m.data)
			continue
		}
		var comp bytes.Buffer
		fw, _ := flate.NewWriter(&comp, flate.BestCompression)
		fw.Write(m.data)
		fw.Close()
		size := m.claim
		if size == 0 {
			size = uint64(len(m.data))
		}
		method := m.method
		if method == 0 {
			method = zip.Deflate
		}
		w, err := zw.CreateRaw(&zip.FileHeader{Name: m.name, Method: method, CRC32: crc32.ChecksumIEEE(m.data),
			CompressedSize64: uint64(comp.Len()), UncompressedSize64: size})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(comp.Bytes())
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func images(n, h, w int) member {
	return member{name: "images.npy", data: npy("|u1", false, []int64{int64(n), int64(h), int64(w)}, make([]byte, n*h*w))}
}

func labels(descr string, vals ...int64) member {
	var data []byte
	for _, v := range vals {
		switch descr {
		case "<i8":
			data = append(data, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
		case "|u1", "|i1":
			data = append(data, byte(v))
		case ">i2":
			data = append(data, byte(v>>8), byte(v))
		case "<f8":
			data = append(data, make([]byte, 8)...)
		}
	}
	size := map[string]int{"<i8": 8, "|u1": 1, "|i1": 1, ">i2": 2, "<f8": 8}[descr]
	return member{name: "labels.npy", data: npy(descr, false, []int64{int64(len(data) / size)}, data)}
}

// TestCheckImageSet: sets numpy wrote (the built-in ones, a compressed
// one) pass; every way a set breaks vision_data.py's contract, or hides a
// huge array behind a small file, is refused from the headers and labels.
func TestCheckImageSet(t *testing.T) {
	digits, err := CheckImageSet("../../data/digits-test.npz", 10)
	if err != nil || digits.N != 359 || !digits.Labelled {
		t.Fatalf("digits-test: %v, %v", digits, err)
	}
	photos, err := CheckImageSet("../../data/skimage-photos.npz", 1000)
	if err != nil || photos.Labelled || photos.Images.Shape[3] != 3 {
		t.Fatalf("skimage-photos: %v, %v", photos, err)
	}
	comp, err := CheckImageSet("testdata/compressed.npz", 3)
	if err != nil || comp.N != 5 || comp.Labels.Descr != "<i4" {
		t.Fatalf("compressed.npz: %v, %v", comp, err)
	}
	if _, err := CheckImageSet("../../data/digits-test.npz", 5); err == nil || !strings.Contains(err.Error(), "labels are 5 or more (the highest 9), but the model has 5 classes") {
		t.Errorf("digits with 5 classes: %v", err)
	}

	dir := t.TempDir()
	// The first bytes of a deflated 1.28 GB array: its header, then zeros
	// (the rest of the stream is never read).
	bomb := images(1, 1, 1)
	bomb.data = npy("|u1", false, []int64{1280000000}, make([]byte, 1<<16))
	bomb.claim = uint64(len(bomb.data)) - 1<<16 + 1280000000
	for _, tc := range []struct {
		name    string
		members []member
		want    string
	}{
		{"float images", []member{{name: "images.npy", data: npy("<f4", false, []int64{2, 2, 2}, make([]byte, 32))}, labels("<i8", 0, 1)}, "images must be uint8 (N, H, W) or (N, H, W, 3), values 0-255; they are <f4 [2 2 2]"},
		{"four channels", []member{{name: "images.npy", data: npy("|u1", false, []int64{1, 2, 2, 4}, make([]byte, 16))}, labels("<i8", 0)}, "they are [1 2 2 4]"},
		{"flat images", []member{{name: "images.npy", data: npy("|u1", false, []int64{4}, make([]byte, 4))}, labels("<i8", 0, 0, 0, 0)}, "images must be (N, H, W) grayscale"},
		{"no images", []member{images(0, 8, 8), labels("<i8")}, "it holds no images"},
		{"no labels", []member{images(2, 8, 8)}, "an image set needs the arrays images and labels"},
		{"float labels", []member{images(2, 8, 8), labels("<f8", 0, 1)}, "labels must be integer class indices"},
		{"too few labels", []member{images(3, 8, 8), labels("<i8", 0, 1)}, "labels must be one class index per image, shape (3,); they are [2]"},
		{"mixed -1", []member{images(3, 8, 8), labels("<i8", 0, -1, 2)}, "1 of 3 labels are -1"},
		{"negative", []member{images(2, 8, 8), labels("|i1", 0, -3)}, "1 labels are negative (the lowest -3)"},
		{"out of range", []member{images(2, 8, 8), labels(">i2", 1, 10)}, "1 labels are 10 or more (the highest 10), but the model has 10 classes"},
		{"object array", []member{{name: "images.npy", data: npy("|O", false, []int64{2}, []byte("\x80\x04pickle"))}, labels("<i8", 0, 1)}, "it holds Python objects (dtype object)"},
		{"record dtype", []member{{name: "images.npy", data: rawNpy("{'descr': [('a', '<i4'), ('b', '<f8', (2,))], 'fortran_order': False, 'shape': (3,), }\n")}, labels("<i8", 0)}, "a structured array"},
		{"not npy", []member{{name: "images.npy", data: []byte("hello")}, labels("<i8", 0)}, "not a .npy array"},
		{"cut short", []member{{name: "images.npy", data: npy("|u1", false, []int64{2, 8, 8}, make([]byte, 100))}, labels("<i8", 0, 1)}, "the member is 228 bytes, but its header says [2 8 8] |u1, which is 256"},
		{"1.28 GB behind a small file", []member{bomb, labels("<i8", 0)}, "its arrays hold 1.19 GiB when expanded (images.npy is [1280000000] |u1), more than the 1.00 GiB an image set may"},
		{"bzip2", []member{{name: "images.npy", data: npy("|u1", false, []int64{1, 1, 1}, []byte{0}), method: 12}, labels("<i8", 0)}, "zip method 12"},
		{"bad header literal", []member{{name: "images.npy", data: rawNpy("{'descr': os.system('x')}\n")}, labels("<i8", 0)}, "not one numpy writes"},
		{"huge header", []member{{name: "images.npy", data: []byte("\x93NUMPY\x02\x00\xff\xff\xff\x00")}, labels("<i8", 0)}, "its .npy header is 16777215 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".npz")
			writeNPZ(t, p, tc.members...)
			_, err := CheckImageSet(p, 10)
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want an npz.Error containing %q", err, tc.want)
			}
		})
	}

	if _, err := CheckImageSet("testdata/pickle.npz", 0); err == nil || !strings.Contains(err.Error(), "images.npy: it holds Python objects") {
		t.Errorf("numpy's pickled object array: %v", err)
	}
	notZip := filepath.Join(dir, "page.npz")
	os.WriteFile(notZip, []byte("<html>"), 0o644)
	if _, err := CheckImageSet(notZip, 0); err == nil || !strings.Contains(err.Error(), "not a zip archive") {
		t.Errorf("not a zip: %v", err)
	}
	fifo := filepath.Join(dir, "fifo.npz")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := CheckImageSet(fifo, 0); done <- err }()
	select {
	case err := <-done:
		var nr *boundedfile.NotRegularError
		if !errors.As(err, &nr) {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO blocked")
	}
}

// TestData: an array's data stream is exactly what its header says, and
// a member that holds more, or less, or fails its checksum is an error.
func TestData(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.npz")
	writeNPZ(t, p, member{name: "a.npy", data: npy("|u1", false, []int64{3}, []byte{1, 2, 3})})
	f, err := Open(p, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rc, err := f.Arrays["a"].Data()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(b, []byte{1, 2, 3}) {
		t.Errorf("data %v, %v", b, err)
	}
	rc.Close()
}
