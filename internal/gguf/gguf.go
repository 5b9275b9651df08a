// Package gguf reads the header of a GGUF file (llama.cpp's model format,
// gguf.md): the version, the metadata key-value pairs of every value type
// (arrays included), and the tensor infos with their dimensions, ggml types
// and offsets. It never reads tensor data. A GGUF comes from users and
// downloads, so every count and length in the header is checked against
// what the file can hold, and against a cap, before anything is allocated
// for it: a header claiming 2^63 tensors or a 2^62-byte string is an error,
// not an allocation, and a file too short for the tensors it describes is
// refused as cut short.
package gguf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
)

// Caps on what a header may claim. Real models stay far under them: a
// 405B model has about 1,100 tensors and 50 metadata keys, the largest
// vocabularies 262,144 tokens and a million merges, a chat template a few
// KB.
const (
	MaxTensors     = 1 << 16
	MaxKV          = 1 << 14
	MaxKeyBytes    = 1 << 10
	MaxNameBytes   = 1 << 8 // ggml's own limit is 63
	MaxStringBytes = 16 << 20
	MaxArrayLen    = 1 << 26
	MaxDims        = 4 // GGML_MAX_DIMS
	maxNesting     = 4
	// keepBytes bounds what a Header keeps of metadata values (strings,
	// and array elements at elemCost each); what is over it, strings over
	// keepString and arrays over keepArray elements are checked and
	// skipped. Keys and tensor names are always kept: their caps bound them.
	keepBytes   = 32 << 20
	keepString  = 1 << 20
	keepArray   = 1 << 16
	elemCost    = 64
	defaultAlig = 32 // GGUF_DEFAULT_ALIGNMENT
)

// Magic is the four bytes every GGUF file starts with.
const Magic = "GGUF"

// Header is a GGUF file's header.
type Header struct {
	Version uint32
	// KV holds the metadata in file order.
	KV      []KV
	Tensors []Tensor
	// Alignment of the tensor data (general.alignment, else 32).
	Alignment int64
	// DataOffset is where the tensor data starts; Size the file's size.
	DataOffset, Size int64
	index            map[string]int
}

// KV is one metadata key and its value.
type KV struct {
	Key   string
	Value Value
}

// Tensor is one tensor info: its name, dimensions (innermost first, as
// ggml counts them), type, offset into the data section, element count
// and size in bytes.
type Tensor struct {
	Name   string
	Dims   []uint64
	Type   TensorType
	Offset uint64
	Elems  int64
	Bytes  int64
}

// Value is a metadata value. A scalar keeps its value; a string is kept
// when it is at most 1 MiB (Len says how long it is); an array keeps its
// element type and length, and its elements when they are scalars or
// strings and there are at most 65,536 of them.
type Value struct {
	Type ValueType
	// Elem and Len describe an array (Len is a string's length too).
	Elem  ValueType
	Len   uint64
	bits  uint64
	str   string
	elems []Value
	kept  bool
}

// Uint returns an unsigned or non-negative signed integer value.
func (v Value) Uint() (uint64, bool) {
	switch v.Type {
	case TypeUint8, TypeUint16, TypeUint32, TypeUint64:
		return v.bits, true
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		if int64(v.bits) >= 0 {
			return v.bits, true
		}
	}
	return 0, false
}

// Int returns an integer value that fits an int64.
func (v Value) Int() (int64, bool) {
	switch v.Type {
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		return int64(v.bits), true
	case TypeUint8, TypeUint16, TypeUint32, TypeUint64:
		if v.bits <= math.MaxInt64 {
			return int64(v.bits), true
		}
	}
	return 0, false
}

// Float returns a float value.
func (v Value) Float() (float64, bool) {
	switch v.Type {
	case TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case TypeFloat64:
		return math.Float64frombits(v.bits), true
	}
	return 0, false
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) { return v.bits != 0, v.Type == TypeBool }

// Str returns a string value that was kept.
func (v Value) Str() (string, bool) { return v.str, v.Type == TypeString && v.kept }

// Array returns an array's elements, when they were kept.
func (v Value) Array() ([]Value, bool) { return v.elems, v.Type == TypeArray && v.kept }

// Get returns the value of a metadata key.
func (h *Header) Get(key string) (Value, bool) {
	i, ok := h.index[key]
	if !ok {
		return Value{}, false
	}
	return h.KV[i].Value, true
}

// Uint returns an unsigned integer metadata value (0, false when absent or
// of another type).
func (h *Header) Uint(key string) (uint64, bool) {
	v, ok := h.Get(key)
	if !ok {
		return 0, false
	}
	return v.Uint()
}

// Str returns a string metadata value.
func (h *Header) Str(key string) (string, bool) {
	v, ok := h.Get(key)
	if !ok {
		return "", false
	}
	return v.Str()
}

// Architecture is general.architecture ("llama", "gemma3"), or "".
func (h *Header) Architecture() string {
	s, _ := h.Str("general.architecture")
	return s
}

// FileType is general.file_type by llama.cpp's name ("Q4_K_M"); ok is
// false when the header does not say.
func (h *Header) FileType() (string, bool) {
	ft, ok := h.Uint("general.file_type")
	if !ok || ft > math.MaxUint32 {
		return "", false
	}
	return FileTypeName(uint32(ft)), true
}

// Params is the number of elements of every tensor: the parameter count.
func (h *Header) Params() int64 {
	var n int64
	for _, t := range h.Tensors {
		n += t.Elems // parse bounds the sum
	}
	return n
}

// TensorTypes counts the tensors of each type ("Q4_K": 27).
func (h *Header) TensorTypes() map[string]int {
	out := map[string]int{}
	for _, t := range h.Tensors {
		out[t.Type.String()]++
	}
	return out
}

// Error is a file that is not a usable GGUF: what is wrong, where in the
// file it was found, and what to do about it.
type Error struct {
	Offset int64
	Msg    string
	Fix    string
}

// fixAgain is the fix of a header no writer of GGUFs makes.
const fixAgain = "download the file again, or convert the model again with llama.cpp"

func (e *Error) Error() string {
	msg := e.Msg
	if e.Offset > 0 {
		msg = fmt.Sprintf("at byte %d, %s", e.Offset, msg)
	}
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
}

// FileError is ReadFile's error: the file and what is wrong with it.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string {
	var fe *Error
	if errors.As(e.Err, &fe) {
		return fmt.Sprintf("%s is not a usable GGUF file: %v", filepath.Base(e.Path), e.Err)
	}
	return fmt.Sprintf("%s: %v", filepath.Base(e.Path), e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// ReadFile reads the header of the GGUF at path, opened without blocking:
// a FIFO or device is a boundedfile.NotRegularError.
func ReadFile(path string) (*Header, error) {
	f, fi, err := boundedfile.Open(path)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	defer f.Close()
	h, err := Parse(f, fi.Size())
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	return h, nil
}

// Parse reads a GGUF header from r, a stream of size bytes (the whole
// file: the tensors must fit in it).
func Parse(r io.Reader, size int64) (*Header, error) {
	p := &parser{r: bufio.NewReaderSize(r, 64<<10), size: size}
	h, err := p.header()
	if err != nil {
		var fe *Error
		if !errors.As(err, &fe) {
			err = &Error{Offset: p.pos, Msg: fmt.Sprintf("the header cannot be read: %v", err), Fix: "check the file system"}
		}
		return nil, err
	}
	return h, nil
}

type parser struct {
	r    *bufio.Reader
	pos  int64
	size int64
	kept int64
}

func (p *parser) fail(format string, args ...any) error {
	return &Error{Offset: p.pos, Msg: fmt.Sprintf(format, args...), Fix: fixAgain}
}

// truncated is the error for a header that claims more than the file
// holds.
func (p *parser) truncated(what string) error {
	return &Error{Offset: p.pos, Msg: fmt.Sprintf("the file ends inside the header (%s): it is cut short, or not a GGUF", what), Fix: fixAgain}
}

// room reports whether n more bytes fit in the file.
func (p *parser) room(n uint64) bool { return n <= uint64(max(p.size-p.pos, 0)) }

func (p *parser) read(b []byte, what string) error {
	if !p.room(uint64(len(b))) {
		return p.truncated(what)
	}
	n, err := io.ReadFull(p.r, b)
	p.pos += int64(n)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return p.truncated(what)
	}
	return err
}

func (p *parser) skip(n uint64, what string) error {
	if !p.room(n) {
		return p.truncated(what)
	}
	d, err := p.r.Discard(int(n))
	p.pos += int64(d)
	if err == io.EOF {
		return p.truncated(what)
	}
	return err
}

func (p *parser) u32(what string) (uint32, error) {
	var b [4]byte
	if err := p.read(b[:], what); err != nil {
		return 0, err
	}
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24, nil
}

func (p *parser) u64(what string) (uint64, error) {
	var b [8]byte
	if err := p.read(b[:], what); err != nil {
		return 0, err
	}
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, nil
}

// str reads a string of at most limit bytes, keeping it when keep is set
// and, for a metadata value (budget set), the header's budget allows.
func (p *parser) str(what string, limit uint64, keep, budget bool) (string, uint64, bool, error) {
	n, err := p.u64(what + " length")
	if err != nil {
		return "", 0, false, err
	}
	if n > limit {
		return "", 0, false, p.fail("%s is %d bytes long, more than a GGUF holds (at most %d)", what, n, limit)
	}
	if !p.room(n) {
		return "", 0, false, p.truncated(what)
	}
	if !keep || budget && (n > keepString || p.kept+int64(n) > keepBytes) {
		return "", n, false, p.skip(n, what)
	}
	b := make([]byte, n)
	if err := p.read(b, what); err != nil {
		return "", 0, false, err
	}
	if budget {
		p.kept += int64(n)
	}
	return string(b), n, true, nil
}

func (p *parser) header() (*Header, error) {
	if err := p.magic(); err != nil {
		return nil, err
	}
	version, err := p.u32("version")
	if err != nil {
		return nil, err
	}
	if err := p.version(version); err != nil {
		return nil, err
	}
	nTensors, err := p.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := p.u64("metadata count")
	if err != nil {
		return nil, err
	}
	if nTensors > MaxTensors {
		return nil, p.fail("the header claims %d tensors, more than a GGUF holds (at most %d)", nTensors, MaxTensors)
	}
	if nKV > MaxKV {
		return nil, p.fail("the header claims %d metadata keys, more than a GGUF holds (at most %d)", nKV, MaxKV)
	}
	// Each key-value pair takes at least 8+4+1 bytes, each tensor info
	// 8+4+4+8: a count the rest of the file cannot hold is refused here,
	// before a slice is sized by it.
	if !p.room(nKV*13 + nTensors*24) {
		return nil, p.truncated(fmt.Sprintf("%d metadata keys and %d tensors claimed", nKV, nTensors))
	}
	h := &Header{Version: version, index: map[string]int{}, KV: make([]KV, 0, min(nKV, 256))}
	for range nKV {
		if err := p.kv(h); err != nil {
			return nil, err
		}
	}
	if err := p.alignment(h); err != nil {
		return nil, err
	}
	h.Tensors = make([]Tensor, 0, min(nTensors, 4096))
	names := map[string]bool{}
	for range nTensors {
		t, err := p.tensor()
		if err != nil {
			return nil, err
		}
		if names[t.Name] {
			return nil, p.fail("tensor %q appears twice", t.Name)
		}
		names[t.Name] = true
		h.Tensors = append(h.Tensors, t)
	}
	h.Size = p.size
	h.DataOffset = (p.pos + h.Alignment - 1) / h.Alignment * h.Alignment
	return h, p.checkData(h)
}

// magic refuses a file that does not start with "GGUF", naming what it
// looks like instead when that is recognizable.
func (p *parser) magic() error {
	head, _ := p.r.Peek(264)
	if len(head) >= 4 && string(head[:4]) == Magic {
		return p.skip(4, "magic")
	}
	return &Error{Msg: "it does not start with the GGUF magic: " + sniff(head)}
}

// sniff names what a file that is not a GGUF looks like.
func sniff(head []byte) string {
	s := string(head)
	trimmed := strings.TrimLeft(s, " \t\r\n\ufeff")
	switch {
	case len(head) == 0:
		return "the file is empty"
	case len(head) >= 262 && s[257:262] == "ustar":
		return "it is a tar archive; take the .gguf out of it"
	case strings.HasPrefix(s, "\x1f\x8b"):
		return "it is gzip-compressed; decompress it"
	case strings.HasPrefix(s, "PK\x03\x04"):
		return "it is a zip archive; take the .gguf out of it"
	case strings.HasPrefix(s, "lmgg"), strings.HasPrefix(s, "fmgg"), strings.HasPrefix(s, "tjgg"):
		return "it is a GGML/GGJT file from before GGUF; convert it with llama.cpp's convert_llama_ggml_to_gguf.py"
	case strings.HasPrefix(trimmed, "<"):
		return "it looks like an HTML or XML page (an error page saved in its place?); download the file again"
	case strings.HasPrefix(trimmed, "{"):
		return "it looks like JSON; point model.source at the .gguf file"
	case strings.HasPrefix(s, "version https://git-lfs"):
		return "it is a Git LFS pointer, not the file; fetch it with git lfs pull"
	}
	return fmt.Sprintf("it starts with %q; check that model.source names a GGUF file", clip(head, 8))
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func (p *parser) version(v uint32) error {
	switch {
	case v == 2 || v == 3:
		return nil
	case v == 1:
		return &Error{Offset: p.pos, Msg: "GGUF version 1 (llama.cpp's first, 2023) is not read by today's tools", Fix: "convert the model again with a current llama.cpp"}
	case bits.ReverseBytes32(v) == 2 || bits.ReverseBytes32(v) == 3:
		return &Error{Offset: p.pos, Msg: "it is a big-endian GGUF, which the converters here cannot read", Fix: "use the little-endian file"}
	}
	return p.fail("GGUF version %d is not one this build reads (2 and 3)", v)
}

func (p *parser) kv(h *Header) error {
	key, _, _, err := p.str("a metadata key", MaxKeyBytes, true, false)
	if err != nil {
		return err
	}
	if key == "" {
		return p.fail("a metadata key is empty")
	}
	if _, dup := h.index[key]; dup {
		return p.fail("metadata key %q appears twice", key)
	}
	t, err := p.u32("the type of " + key)
	if err != nil {
		return err
	}
	v, err := p.value(key, ValueType(t), 0, true)
	if err != nil {
		return err
	}
	h.index[key] = len(h.KV)
	h.KV = append(h.KV, KV{Key: key, Value: v})
	return nil
}

func (p *parser) value(key string, t ValueType, depth int, keep bool) (Value, error) {
	if t >= numValueTypes {
		return Value{}, p.fail("metadata %q has value type %d, which GGUF does not have", key, uint32(t))
	}
	v := Value{Type: t, kept: keep}
	switch t {
	case TypeString:
		s, n, kept, err := p.str(fmt.Sprintf("the string of %q", key), MaxStringBytes, keep, true)
		v.str, v.Len, v.kept = s, n, kept
		return v, err
	case TypeArray:
		return p.array(key, depth)
	}
	var b [8]byte
	n := t.size()
	if err := p.read(b[:n], "the value of "+key); err != nil {
		return Value{}, err
	}
	for i := n - 1; i >= 0; i-- {
		v.bits = v.bits<<8 | uint64(b[i])
	}
	if shift := 64 - 8*n; t == TypeInt8 || t == TypeInt16 || t == TypeInt32 {
		v.bits = uint64(int64(v.bits<<shift) >> shift) // sign-extend
	}
	return v, nil
}

func (p *parser) array(key string, depth int) (Value, error) {
	if depth >= maxNesting {
		return Value{}, p.fail("metadata %q nests arrays %d deep, deeper than a GGUF holds", key, depth+1)
	}
	et, err := p.u32("the element type of " + key)
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if elem >= numValueTypes {
		return Value{}, p.fail("metadata %q is an array of value type %d, which GGUF does not have", key, et)
	}
	n, err := p.u64("the length of " + key)
	if err != nil {
		return Value{}, err
	}
	if n > MaxArrayLen {
		return Value{}, p.fail("metadata %q claims %d elements, more than a GGUF holds (at most %d)", key, n, MaxArrayLen)
	}
	if !p.room(n * elem.minSize()) {
		return Value{}, p.truncated(fmt.Sprintf("%q claims %d elements", key, n))
	}
	v := Value{Type: TypeArray, Elem: elem, Len: n}
	if sz := elem.size(); sz > 0 && n > keepArray {
		return v, p.skip(n*uint64(sz), "the elements of "+key) // a long numeric array is not kept
	}
	keep := elem != TypeArray && n <= keepArray && p.kept+int64(n)*elemCost <= keepBytes
	v.kept = keep
	if keep {
		p.kept += int64(n) * elemCost
		v.elems = make([]Value, 0, n)
	}
	for range n {
		e, err := p.value(key, elem, depth+1, keep)
		if err != nil {
			return Value{}, err
		}
		if keep {
			v.elems = append(v.elems, e)
		}
	}
	return v, nil
}

func (p *parser) alignment(h *Header) error {
	h.Alignment = defaultAlig
	v, ok := h.Get("general.alignment")
	if !ok {
		return nil
	}
	a, isUint := v.Uint()
	if v.Type != TypeUint32 || !isUint || a == 0 || a&(a-1) != 0 {
		return p.fail("general.alignment must be a power of two (a uint32); it is %s %d", v.Type, a)
	}
	h.Alignment = int64(a)
	return nil
}

func (p *parser) tensor() (Tensor, error) {
	name, _, _, err := p.str("a tensor name", MaxNameBytes, true, false)
	if err != nil {
		return Tensor{}, err
	}
	nd, err := p.u32("the dimension count of " + name)
	if err != nil {
		return Tensor{}, err
	}
	if nd > MaxDims {
		return Tensor{}, p.fail("tensor %q has %d dimensions, more than ggml's %d", name, nd, MaxDims)
	}
	t := Tensor{Name: name, Dims: make([]uint64, nd), Elems: 1}
	for i := range t.Dims {
		d, err := p.u64("the dimensions of " + name)
		if err != nil {
			return Tensor{}, err
		}
		if d > math.MaxInt64 || (d > 0 && t.Elems > math.MaxInt64/int64(d)) {
			return Tensor{}, p.fail("tensor %q has dimensions whose product overflows: not a plausible tensor", name)
		}
		t.Dims[i] = d
		t.Elems *= int64(d)
	}
	typ, err := p.u32("the type of " + name)
	if err != nil {
		return Tensor{}, err
	}
	t.Type = TensorType(typ)
	block, size, ok := t.Type.BlockSize()
	if !ok {
		return Tensor{}, p.fail("tensor %q has ggml type %d, which this build does not know (or ggml retired)", name, typ)
	}
	if nd > 0 && t.Dims[0]%uint64(block) != 0 {
		return Tensor{}, p.fail("tensor %q is %s, whose blocks hold %d elements, but its rows hold %d", name, t.Type, block, t.Dims[0])
	}
	if t.Elems/block > math.MaxInt64/size {
		return Tensor{}, p.fail("tensor %q is larger than a file can be", name)
	}
	t.Bytes = t.Elems / block * size
	t.Offset, err = p.u64("the offset of " + name)
	return t, err
}

// checkData checks every tensor's data against the file: aligned, and
// inside it. A file cut short by a failed download is refused here, with
// no tensor byte read.
func (p *parser) checkData(h *Header) error {
	if len(h.Tensors) == 0 {
		return nil
	}
	if h.DataOffset > h.Size {
		return &Error{Offset: h.Size, Msg: "the file ends before its tensor data starts: it is cut short", Fix: fixAgain}
	}
	room := uint64(h.Size - h.DataOffset)
	var total int64
	for _, t := range h.Tensors {
		if t.Offset%uint64(h.Alignment) != 0 {
			return &Error{Msg: fmt.Sprintf("tensor %q starts at offset %d, not a multiple of the alignment %d", t.Name, t.Offset, h.Alignment), Fix: fixAgain}
		}
		if t.Offset > room || uint64(t.Bytes) > room-t.Offset {
			return &Error{Msg: fmt.Sprintf("tensor %q (%d bytes at data offset %d) ends past the end of the file, which holds %d bytes of tensor data: the file is cut short (or its header lies)", t.Name, t.Bytes, t.Offset, room), Fix: fixAgain}
		}
		if total > math.MaxInt64-t.Elems {
			return &Error{Msg: "the tensors' element counts add up past what any model holds", Fix: fixAgain}
		}
		total += t.Elems
	}
	return nil
}
