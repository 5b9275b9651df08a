package standin

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// npyArray is one .npy array: its dtype, shape and raw data.
type npyArray struct {
	Descr string
	Shape []int
	Data  []byte
}

var (
	npyDescr = regexp.MustCompile(`'descr':\s*'([^']+)'`)
	npyShape = regexp.MustCompile(`'shape':\s*\(([^)]*)\)`)
)

// parseNPY reads numpy's .npy format (versions 1-3): magic, version,
// header length, a Python dict literal, then the data.
func parseNPY(b []byte) (npyArray, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return npyArray{}, fmt.Errorf("not a .npy array")
	}
	var hl, off int
	if b[6] == 1 {
		hl, off = int(binary.LittleEndian.Uint16(b[8:10])), 10
	} else {
		if len(b) < 12 {
			return npyArray{}, fmt.Errorf("truncated .npy header")
		}
		hl, off = int(binary.LittleEndian.Uint32(b[8:12])), 12
	}
	if off+hl > len(b) {
		return npyArray{}, fmt.Errorf("truncated .npy header")
	}
	h := string(b[off : off+hl])
	d, s := npyDescr.FindStringSubmatch(h), npyShape.FindStringSubmatch(h)
	if d == nil || s == nil || strings.Contains(h, "'fortran_order': True") {
		return npyArray{}, fmt.Errorf(".npy header %q is not a C-ordered array", h)
	}
	a := npyArray{Descr: d[1], Data: b[off+hl:]}
	for _, f := range strings.Split(s[1], ",") {
		if f = strings.TrimSpace(f); f != "" {
			n, err := strconv.Atoi(f)
			if err != nil {
				return npyArray{}, fmt.Errorf(".npy shape %q: %w", s[1], err)
			}
			a.Shape = append(a.Shape, n)
		}
	}
	return a, nil
}

// int64s decodes a little-endian int64 vector.
func (a npyArray) int64s() ([]int64, error) {
	if a.Descr != "<i8" || len(a.Shape) != 1 || len(a.Data) != 8*a.Shape[0] {
		return nil, fmt.Errorf("want an int64 vector, got %s %v", a.Descr, a.Shape)
	}
	out := make([]int64, a.Shape[0])
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(a.Data[8*i:]))
	}
	return out, nil
}

// imageSet is an image set (.npz): images uint8 and labels int64, as
// vision_data.py reads it. Every label -1 (Unlabelled) is an unlabelled
// set, scored by agreement only; some -1 among class indices is an error.
type imageSet struct {
	Images     npyArray
	Labels     []int64
	Unlabelled bool
}

// Unlabelled is the label of every image of an unlabelled set
// (vision_data.UNLABELLED).
const Unlabelled = -1

func readImageSet(path string) (*imageSet, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return nil, fmt.Errorf("%s: an image set is an .npz file: %w", path, err)
	}
	defer zr.Close()
	arrays := map[string]npyArray{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(io.LimitReader(rc, 1<<30))
		rc.Close()
		if err != nil {
			return nil, err
		}
		a, err := parseNPY(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, f.Name, err)
		}
		arrays[strings.TrimSuffix(f.Name, ".npy")] = a
	}
	im, ok1 := arrays["images"]
	lb, ok2 := arrays["labels"]
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%s: an image set needs arrays 'images' and 'labels'", path)
	}
	if im.Descr != "|u1" || len(im.Shape) < 3 {
		return nil, fmt.Errorf("%s: images must be uint8 (N, H, W[, 3]), got %s %v", path, im.Descr, im.Shape)
	}
	labels, err := lb.int64s()
	if err != nil {
		return nil, fmt.Errorf("%s: labels: %w", path, err)
	}
	if len(labels) != im.Shape[0] {
		return nil, fmt.Errorf("%s: %d labels for %d images", path, len(labels), im.Shape[0])
	}
	missing := 0
	for _, l := range labels {
		if l == Unlabelled {
			missing++
		}
	}
	if missing > 0 && missing < len(labels) {
		return nil, fmt.Errorf("%s: %d of %d labels are -1: a set is labelled (class indices) or unlabelled (every label -1), not both", path, missing, len(labels))
	}
	return &imageSet{Images: im, Labels: labels, Unlabelled: missing > 0}, nil
}

// image returns the bytes of image i.
func (s *imageSet) image(i int) []byte {
	n := len(s.Images.Data) / s.Images.Shape[0]
	return s.Images.Data[i*n : (i+1)*n]
}

// writeInt64NPY writes v as a version 1 .npy file, as numpy.save does.
func writeInt64NPY(path string, v []int64) error {
	h := fmt.Sprintf("{'descr': '<i8', 'fortran_order': False, 'shape': (%d,), }", len(v))
	pad := 64 - (10+len(h)+1)%64
	h += strings.Repeat(" ", pad%64) + "\n"
	var buf bytes.Buffer
	buf.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&buf, binary.LittleEndian, uint16(len(h)))
	buf.WriteString(h)
	for _, x := range v {
		binary.Write(&buf, binary.LittleEndian, x)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func readInt64NPY(path string) ([]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	a, err := parseNPY(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a.int64s()
}
