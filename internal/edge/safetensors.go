package edge

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
)

// formatHeaderLimit is the safetensors format's own limit on a header
// (100 MB); a larger length prefix means the file is not safetensors.
const formatHeaderLimit = 100_000_000

// maxHeaderBytes is the largest header edgepipe reads, far under the
// format's limit: a header is about 100 bytes of JSON per tensor, so a
// 70B model's 723 tensors take under 100 KB, and even a shard of a large
// mixture of experts (thousands of expert tensors and their scales) a
// few MB. A header between this and the format's limit is refused with
// its size, never read: decoding one cost several times its size in
// memory (a 78 MB header took 607 MB).
const maxHeaderBytes = 16 << 20

// floatDtypes are the element types whose count is a parameter count.
// Quantized checkpoints pack several weights into integer elements, so
// their headers do not count parameters.
var floatDtypes = []string{"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"}

// safetensorsParams sums the elements of every tensor in the folder's
// safetensors files (the shards an index lists, else every top-level
// *.safetensors), reading only the headers. files is how many headers it read.
func safetensorsParams(dir string) (params int64, files int, err error) {
	return sumTensors(dir, floatElems)
}

// sumTensors adds count over every tensor of the folder's safetensors
// files, reading only the headers; files is how many headers it read.
func sumTensors(dir string, count func(headerTensor) (int64, error)) (total int64, files int, err error) {
	names, err := safetensorsFiles(dir)
	if err != nil {
		return 0, 0, err
	}
	if len(names) == 0 {
		return 0, 0, errors.New("no safetensors weights in the folder")
	}
	for _, name := range names {
		n, err := headerSum(filepath.Join(dir, name), count)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", name, err)
		}
		total += n
	}
	return total, len(names), nil
}

// safetensorsFiles prefers the index's shard list: some repositories ship
// the same weights twice (consolidated.safetensors beside the shards). An
// index naming a file outside the folder is an IndexEntryError, not skipped:
// no tool should read weights from where the index points.
func safetensorsFiles(dir string) ([]string, error) {
	b, err := boundedfile.Read(filepath.Join(dir, indexFile), boundedfile.ModelJSONLimit)
	if err == nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			return nil, fmt.Errorf("%s: %w", indexFile, err)
		}
		var names []string
		for _, f := range idx.WeightMap {
			if !slices.Contains(names, f) {
				names = append(names, f)
			}
		}
		slices.Sort(names)
		for _, f := range names {
			if !localName(f) {
				return nil, &IndexEntryError{Index: indexFile, Entry: f}
			}
		}
		return names, nil
	}
	var notRegular *boundedfile.NotRegularError
	var tooLarge *boundedfile.TooLargeError
	if errors.As(err, &notRegular) || errors.As(err, &tooLarge) {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".safetensors") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

const indexFile = "model.safetensors.index.json"

// localName reports whether an index entry names a file inside the folder:
// relative, without "..", and not empty.
func localName(name string) bool {
	return name != "" && !strings.Contains(name, "\\") && filepath.IsLocal(filepath.FromSlash(name))
}

// IndexEntryError is a weights index that names a file outside the model
// folder (an absolute path, or one that climbs out with "..").
type IndexEntryError struct{ Index, Entry string }

func (e *IndexEntryError) Error() string {
	return fmt.Sprintf("%s names %q, which is outside the model folder: an index may name only files in its own folder; fix or remove the index", e.Index, e.Entry)
}

// LargestTensorBytes is the size of the largest tensor in the folder's
// safetensors files (the shards an index lists, else every top-level
// *.safetensors), reading only the headers. Tools that quantize or convert
// a tensor at a time hold a few copies of the largest one, which in an LLM
// is the embedding: with a large vocabulary (Gemma's 262K) it, more than
// the model's total size, sets their peak memory.
func LargestTensorBytes(dir string) (int64, error) {
	names, err := safetensorsFiles(dir)
	if err != nil {
		return 0, err
	}
	if len(names) == 0 {
		return 0, errors.New("no safetensors weights in the folder")
	}
	var largest int64
	for _, name := range names {
		err := eachTensor(filepath.Join(dir, name), func(t headerTensor) error {
			largest = max(largest, t.bytes)
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
	}
	return largest, nil
}

// headerParams counts one file's parameters from its header.
func headerParams(path string) (int64, error) {
	return headerSum(path, floatElems)
}

// headerSum adds count over one file's tensors, from its header.
func headerSum(path string, count func(headerTensor) (int64, error)) (int64, error) {
	var total int64
	err := eachTensor(path, func(t headerTensor) error {
		n, err := count(t)
		total += n
		return err
	})
	if err != nil {
		return 0, err
	}
	return total, nil
}

// floatElems counts a float tensor's elements and refuses any other:
// quantized checkpoints pack several weights into integer elements.
func floatElems(t headerTensor) (int64, error) {
	if !slices.Contains(floatDtypes, t.dtype) {
		return 0, fmt.Errorf("tensor %s is %s: a quantized checkpoint, whose header does not count parameters", t.name, t.dtype)
	}
	return t.elems, nil
}

// dtypeBytes sizes a tensor whose header gives no data offsets.
var dtypeBytes = map[string]int64{"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4,
	"F16": 2, "BF16": 2, "I16": 2, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "BOOL": 1}

// headerTensor is one tensor as a safetensors header describes it.
type headerTensor struct {
	name, dtype string
	elems       int64
	bytes       int64 // from its data offsets, else its dtype and shape
}

// eachTensor reads one file's header, an 8-byte little-endian length and
// then that many bytes of JSON mapping tensor names to dtype, shape and
// offsets, and calls fn for each tensor in order. The JSON is decoded as
// a stream, one tensor at a time, so the memory it takes is about one
// entry's, whatever the header's size; a name listed twice is passed
// twice (a hostile header can claim any shape anyway).
func eachTensor(path string, fn func(headerTensor) error) error {
	f, fi, err := boundedfile.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil {
		return errors.New("not a safetensors file (shorter than its 8-byte header length)")
	}
	switch {
	case n < 2 || n > formatHeaderLimit:
		return fmt.Errorf("not a safetensors file (header length %d)", n)
	case n > maxHeaderBytes:
		return fmt.Errorf("its safetensors header is %d bytes (%.0f MiB), more than the %d MiB edgepipe reads: real headers, even of 70B models, are a few MB at most, so this file is not a checkpoint edgepipe can size",
			n, float64(n)/(1<<20), maxHeaderBytes>>20)
	}
	if n > uint64(fi.Size()-8) {
		return fmt.Errorf("not a safetensors file (header cut short: %d bytes claimed, the file holds %d)", n, fi.Size()-8)
	}
	dec := json.NewDecoder(bufio.NewReader(io.LimitReader(f, int64(n))))
	notJSON := func(err error) error {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("not a safetensors file (header is not JSON: %v)", err)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		if err == nil {
			err = fmt.Errorf("it is %v, not an object", tok)
		}
		return notJSON(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return notJSON(err)
		}
		name, _ := tok.(string)
		if name == "__metadata__" {
			if err := dec.Decode(&skipJSON{}); err != nil {
				return notJSON(err)
			}
			continue
		}
		var t struct {
			Dtype   string   `json:"dtype"`
			Shape   []int64  `json:"shape"`
			Offsets [2]int64 `json:"data_offsets"`
		}
		if err := dec.Decode(&t); err != nil {
			return fmt.Errorf("tensor %s: %v", name, err)
		}
		elems := int64(1)
		for _, d := range t.Shape {
			if d < 0 || (d > 0 && elems > (1<<62)/d) {
				return fmt.Errorf("tensor %s: shape %v is not plausible", name, t.Shape)
			}
			elems *= d
		}
		size := t.Offsets[1] - t.Offsets[0]
		if size <= 0 {
			size = elems * dtypeBytes[t.Dtype]
		}
		if err := fn(headerTensor{name: name, dtype: t.Dtype, elems: elems, bytes: size}); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return notJSON(err)
	}
	// After the object only padding may follow (writers pad with spaces).
	if tok, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("%v after the object", tok)
		}
		return notJSON(err)
	}
	return nil
}

// skipJSON decodes any JSON value into nothing.
type skipJSON struct{}

func (skipJSON) UnmarshalJSON([]byte) error { return nil }
