package npz

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
)

// MaxImageSetBytes caps an image set's arrays, expanded: every tool loads
// the whole set and then a float32 copy of it at the model's input size,
// several times larger. Calibration needs hundreds of images and a gate a
// few thousand; a set over the cap is refused before it is expanded.
const MaxImageSetBytes = 1 << 30

// Unlabelled is the label of every image of an unlabelled set.
const Unlabelled = -1

// ImageSet is what CheckImageSet learned of a set.
type ImageSet struct {
	Images, Labels *Array
	// N is the number of images, Labelled whether they carry class
	// indices (else every label is -1).
	N        int64
	Labelled bool
}

// CheckImageSet checks an image set against the contract every vision
// tool reads it by (pipelines/pylib/vision_data.py): arrays images, uint8
// (N, H, W) or (N, H, W, 3) with N > 0, and labels, integers (N,): class
// indices, under classes when it is known (> 0), or all -1 for an
// unlabelled set, not a mix. It reads the headers first and refuses a set
// over MaxImageSetBytes before expanding anything; then it reads the
// labels, never the images.
func CheckImageSet(path string, classes int) (*ImageSet, error) {
	f, err := Open(path, []string{"images", "labels"}, MaxImageSetBytes)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return checkImageSet(f, classes)
}

func checkImageSet(f *File, classes int) (*ImageSet, error) {
	set, err := checkArrays(f)
	if err != nil {
		return nil, err
	}
	if err := set.checkLabels(classes); err != nil {
		return nil, err
	}
	return set, nil
}

func checkArrays(f *File) (*ImageSet, error) {
	im, okI := f.Arrays["images"]
	lb, okL := f.Arrays["labels"]
	if !okI || !okL {
		return nil, fail("an image set needs the arrays images and labels (numpy.savez(path, images=..., labels=...))")
	}
	shape := im.Shape
	switch {
	case im.Kind != 'u' || im.ItemSize != 1:
		return nil, fail("images must be uint8 (N, H, W) or (N, H, W, 3), values 0-255; they are %s %v", im.Descr, shape)
	case len(shape) != 3 && len(shape) != 4, len(shape) == 4 && shape[3] != 3:
		return nil, fail("images must be (N, H, W) grayscale or (N, H, W, 3) RGB; they are %v", shape)
	case shape[0] == 0:
		return nil, fail("it holds no images: a set needs at least one")
	case shape[1] == 0 || shape[2] == 0:
		return nil, fail("its images are %dx%d pixels: an image needs at least one", shape[1], shape[2])
	}
	switch {
	case lb.Kind != 'i' && lb.Kind != 'u':
		return nil, fail("labels must be integer class indices (int64), one per image; they are %s %v", lb.Descr, lb.Shape)
	case lb.ItemSize != 1 && lb.ItemSize != 2 && lb.ItemSize != 4 && lb.ItemSize != 8:
		return nil, fail("labels must be int64 class indices; they are %s", lb.Descr)
	case len(lb.Shape) != 1 || lb.Shape[0] != shape[0]:
		return nil, fail("labels must be one class index per image, shape (%d,); they are %v", shape[0], lb.Shape)
	}
	return &ImageSet{Images: im, Labels: lb, N: shape[0]}, nil
}

// checkLabels streams the labels: all -1 (unlabelled), or all class
// indices in [0, classes).
func (s *ImageSet) checkLabels(classes int) error {
	rc, err := s.Labels.Data()
	if err != nil {
		return fail("its labels cannot be read (%v)", err)
	}
	defer rc.Close()
	r := bufio.NewReader(rc)
	size := int(s.Labels.ItemSize)
	buf := make([]byte, size)
	var unlabelled, low, high int64
	var lowest, highest int64
	for i := int64(0); i < s.N; i++ {
		if _, err := io.ReadFull(r, buf); err != nil {
			return fail("its labels are cut short (%v)", err)
		}
		v := s.Labels.intAt(buf)
		switch {
		case v == Unlabelled:
			unlabelled++
		case v < 0:
			low++
			lowest = min(lowest, v)
		case classes > 0 && v >= int64(classes):
			high++
			highest = max(highest, v)
		}
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return fail("its labels cannot be read (%v)", err)
	}
	switch {
	case unlabelled > 0 && unlabelled < s.N:
		return fail("%d of %d labels are -1: a set is labelled (class indices) or unlabelled (every label -1), not both", unlabelled, s.N)
	case low > 0:
		return fail("%d labels are negative (the lowest %d): labels are class indices from 0, or -1 for every image of an unlabelled set", low, lowest)
	case high > 0:
		return fail("%d labels are %d or more (the highest %d), but the model has %d classes: labels are class indices 0-%d", high, classes, highest, classes, classes-1)
	}
	s.Labelled = unlabelled == 0
	return nil
}

// intAt decodes one integer element.
func (a *Array) intAt(b []byte) int64 {
	var order binary.ByteOrder = binary.LittleEndian
	if a.BigEndian {
		order = binary.BigEndian
	}
	signed := a.Kind == 'i'
	switch len(b) {
	case 1:
		if signed {
			return int64(int8(b[0]))
		}
		return int64(b[0])
	case 2:
		if signed {
			return int64(int16(order.Uint16(b)))
		}
		return int64(order.Uint16(b))
	case 4:
		if signed {
			return int64(int32(order.Uint32(b)))
		}
		return int64(order.Uint32(b))
	case 8:
		v := order.Uint64(b)
		if !signed && v > 1<<62 {
			return 1 << 62 // any class index this large is out of range
		}
		return int64(v)
	}
	return 0
}

// String names the set's shape, for messages.
func (s *ImageSet) String() string {
	return fmt.Sprintf("%d images %v", s.N, s.Images.Shape[1:])
}

// ImageHashes is a 64-bit hash of every image of a set, in order (the
// image's pixels and its dimensions), for telling whether two sets share
// images; it streams the images and keeps only the hashes. The set must
// pass CheckImageSet's header checks.
func ImageHashes(r io.ReaderAt, size int64) ([]uint64, error) {
	f, err := Read(r, size, []string{"images", "labels"}, MaxImageSetBytes)
	if err != nil {
		return nil, err
	}
	set, err := checkArrays(f)
	if err != nil {
		return nil, err
	}
	im := set.Images
	rc, err := im.Data()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 1<<20)
	if im.FortranOrder {
		// Column-major: an image's pixels are spread over the whole array,
		// so only the set as a whole is compared.
		h := fnv.New64a()
		fmt.Fprint(h, im.Shape)
		if _, err := io.Copy(h, br); err != nil {
			return nil, fail("its images cannot be read (%v)", err)
		}
		return []uint64{h.Sum64()}, nil
	}
	row := make([]byte, im.DataBytes/set.N)
	out := make([]uint64, 0, set.N)
	for range set.N {
		if _, err := io.ReadFull(br, row); err != nil {
			return nil, fail("its images are cut short (%v)", err)
		}
		h := fnv.New64a()
		fmt.Fprint(h, im.Shape[1:])
		h.Write(row)
		out = append(out, h.Sum64())
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return nil, fail("its images cannot be read (%v)", err)
	}
	return out, nil
}
