package gguf_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/gguf"
	"github.com/edgepipe/edgepipe/internal/gguf/gguftest"
)

func parse(t *testing.T, b []byte) (*gguf.Header, error) {
	t.Helper()
	return gguf.Parse(bytes.NewReader(b), int64(len(b)))
}

// TestGGUFPy reads a file llama.cpp's own writer (gguf-py) made
// (testdata/make_gguf_py.py): every value type, nested arrays, a 64-byte
// alignment, quantized and float tensors.
func TestGGUFPy(t *testing.T) {
	h, err := gguf.ReadFile("testdata/gguf-py.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 3 || h.Alignment != 64 || h.DataOffset != 960 || h.Size != 1536 {
		t.Errorf("version %d, alignment %d, data at %d of %d", h.Version, h.Alignment, h.DataOffset, h.Size)
	}
	if h.Architecture() != "llama" {
		t.Errorf("architecture %q", h.Architecture())
	}
	if ft, ok := h.FileType(); !ok || ft != "Q4_K_M" {
		t.Errorf("file type %q, %v", ft, ok)
	}
	get := func(key string) gguf.Value {
		v, ok := h.Get(key)
		if !ok {
			t.Fatalf("no %s", key)
		}
		return v
	}
	ints := map[string]int64{"test.u8": 200, "test.i8": -100, "test.u16": 60000, "test.i16": -30000,
		"test.u32": 4000000000, "test.i32": -2000000000, "test.i64": -9000000000000000000}
	for k, want := range ints {
		if got, ok := get(k).Int(); !ok || got != want {
			t.Errorf("%s = %d, %v; want %d", k, got, ok, want)
		}
	}
	if got, ok := get("test.u64").Uint(); !ok || got != 18000000000000000000 {
		t.Errorf("test.u64 = %d, %v", got, ok)
	}
	if _, ok := get("test.u64").Int(); ok {
		t.Error("test.u64 fits an int64?")
	}
	if _, ok := get("test.i8").Uint(); ok {
		t.Error("a negative int8 is a uint?")
	}
	if f, _ := get("test.f32").Float(); f != 1.5 {
		t.Errorf("test.f32 = %v", f)
	}
	if f, _ := get("test.f64").Float(); f != -2.25 {
		t.Errorf("test.f64 = %v", f)
	}
	if b, ok := get("test.bool").Bool(); !b || !ok {
		t.Errorf("test.bool = %v, %v", b, ok)
	}
	if s, _ := h.Str("test.str"); s != "héllo" {
		t.Errorf("test.str = %q", s)
	}
	arr, ok := get("test.arr_i32").Array()
	if !ok || len(arr) != 3 {
		t.Fatalf("test.arr_i32 = %v, %v", arr, ok)
	}
	if n, _ := arr[1].Int(); n != -2 {
		t.Errorf("test.arr_i32[1] = %d", n)
	}
	strs, _ := get("test.arr_str").Array()
	if len(strs) != 3 {
		t.Fatalf("test.arr_str has %d", len(strs))
	}
	if s, _ := strs[1].Str(); s != "bc" {
		t.Errorf("test.arr_str[1] = %q", s)
	}
	if v := get("test.arr_arr"); v.Elem != gguf.TypeArray || v.Len != 2 {
		t.Errorf("test.arr_arr: %v of %d", v.Elem, v.Len)
	}
	want := []struct {
		name  string
		typ   string
		dims  []uint64
		bytes int64
	}{{"f32", "F32", []uint64{8}, 32}, {"f16", "F16", []uint64{32, 3}, 192}, {"q4k", "Q4_K", []uint64{256, 2}, 288}}
	if len(h.Tensors) != len(want) {
		t.Fatalf("%d tensors", len(h.Tensors))
	}
	for i, w := range want {
		got := h.Tensors[i]
		if got.Name != w.name || got.Type.String() != w.typ || !equal(got.Dims, w.dims) || got.Bytes != w.bytes {
			t.Errorf("tensor %d = %+v, want %+v", i, got, w)
		}
	}
	if p := h.Params(); p != 8+96+512 {
		t.Errorf("params %d", p)
	}
	if tt := h.TensorTypes(); tt["Q4_K"] != 1 || tt["F16"] != 1 || tt["F32"] != 1 {
		t.Errorf("tensor types %v", tt)
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRoundTrip: what gguftest writes (every value type, arrays of
// arrays, a Llama-shaped model) reads back the same.
func TestRoundTrip(t *testing.T) {
	m := gguftest.Tiny()
	m.Extra = []gguftest.KV{{Key: "x.i16s", Value: []int16{-1, 2}}, {Key: "x.nested", Value: []any{[]uint8{1}, []uint8{2, 3}}},
		{Key: "x.f64s", Value: []float64{0.5}}, {Key: "x.bools", Value: []bool{true, false}}}
	b, err := m.File().Bytes()
	if err != nil {
		t.Fatal(err)
	}
	h, err := parse(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Params() != m.Params() || len(h.Tensors) != 3+9*2 {
		t.Errorf("params %d (want %d), %d tensors", h.Params(), m.Params(), len(h.Tensors))
	}
	if n, _ := h.Uint("llama.block_count"); n != 2 {
		t.Errorf("block_count %d", n)
	}
	if v, _ := h.Get("tokenizer.ggml.tokens"); v.Len != 256 || v.Elem != gguf.TypeString {
		t.Errorf("tokens: %d %v", v.Len, v.Elem)
	}
	if ft, _ := h.FileType(); ft != "Q8_0" {
		t.Errorf("file type %q", ft)
	}
	if v, _ := h.Get("x.i16s"); v.Elem != gguf.TypeInt16 {
		t.Errorf("x.i16s is an array of %v", v.Elem)
	}
}

// header is a hand-made GGUF header: magic, version, counts, then raw.
func header(version uint32, tensors, kvs uint64, raw ...[]byte) []byte {
	b := []byte(gguf.Magic)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, tensors)
	b = binary.LittleEndian.AppendUint64(b, kvs)
	for _, r := range raw {
		b = append(b, r...)
	}
	return b
}

func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func str(s string) []byte { return append(u64(uint64(len(s))), s...) }

// tensorInfo is one tensor info: name, dims, ggml type, offset.
func tensorInfo(name string, typ uint32, offset uint64, dims ...uint64) []byte {
	b := append(str(name), u32(uint32(len(dims)))...)
	for _, d := range dims {
		b = append(b, u64(d)...)
	}
	return append(append(b, u32(typ)...), u64(offset)...)
}

// TestRefusals: every malformed or hostile header is an error that says
// what is wrong, found before anything is allocated for its counts.
func TestRefusals(t *testing.T) {
	tar := make([]byte, 600)
	copy(tar, "model.gguf")
	copy(tar[257:], "ustar")
	pad := make([]byte, 4096) // room, so only the claim is wrong
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "the file is empty"},
		{"tarball", tar, "it is a tar archive"},
		{"gzip", []byte("\x1f\x8b\x08\x00rest"), "gzip-compressed"},
		{"HTML page", []byte("<!DOCTYPE html><html>Not Found</html>"), "HTML or XML page"},
		{"LFS pointer", []byte("version https://git-lfs.github.com/spec/v1\n"), "Git LFS pointer"},
		{"GGJT", []byte("tjgg\x01\x00\x00\x00"), "from before GGUF"},
		{"other", []byte("\x00\x01\x02\x03rest"), `it starts with "\x00\x01\x02\x03rest"`},
		{"version 1", header(1, 0, 0), "GGUF version 1"},
		{"big-endian", header(0x03000000, 0, 0), "big-endian GGUF"},
		{"version 9", header(9, 0, 0), "GGUF version 9 is not one"},
		{"2^63 tensors", header(3, 1<<63, 0, pad), "claims 9223372036854775808 tensors, more than a GGUF holds"},
		{"2^63 keys", header(3, 0, 1<<63, pad), "claims 9223372036854775808 metadata keys"},
		{"counts the file cannot hold", header(3, 1000, 0), "the file ends inside the header (0 metadata keys and 1000 tensors claimed)"},
		{"2^62-byte string", header(3, 0, 1, str("k"), u32(8), u64(1<<62), pad), `the string of "k" is 4611686018427387904 bytes long`},
		{"string past the end", header(3, 0, 1, str("k"), u32(8), u64(5000), pad), "the file ends inside the header (the string of \"k\")"},
		{"huge key", header(3, 0, 1, u64(1<<20), pad), "a metadata key is 1048576 bytes long"},
		{"empty key", header(3, 0, 1, str(""), u32(4), u32(1), pad), "a metadata key is empty"},
		{"duplicate key", header(3, 0, 2, str("k"), u32(4), u32(1), str("k"), u32(4), u32(1), pad), `"k" appears twice`},
		{"unknown value type", header(3, 0, 1, str("k"), u32(13), pad), "value type 13, which GGUF does not have"},
		{"2^62-element array", header(3, 0, 1, str("k"), u32(9), u32(0), u64(1<<62), pad), "claims 4611686018427387904 elements"},
		{"array past the end", header(3, 0, 1, str("k"), u32(9), u32(10), u64(1<<20), pad), `"k" claims 1048576 elements`},
		{"array of unknown type", header(3, 0, 1, str("k"), u32(9), u32(99), u64(1), pad), "an array of value type 99"},
		{"arrays nested too deep", header(3, 0, 1, str("k"), u32(9), u32(9), u64(1), u32(9), u64(1), u32(9), u64(1), u32(9), u64(1), u32(9), u64(1), pad), "nests arrays 5 deep"},
		{"alignment not a power of two", header(3, 0, 1, str("general.alignment"), u32(4), u32(48), pad), "general.alignment must be a power of two"},
		{"alignment of the wrong type", header(3, 0, 1, str("general.alignment"), u32(10), u64(32), pad), "general.alignment must be a power of two"},
		{"five dimensions", header(3, 1, 0, tensorInfo("w", 0, 0, 1, 1, 1, 1, 1), pad), `tensor "w" has 5 dimensions`},
		{"dimensions overflow", header(3, 1, 0, tensorInfo("w", 0, 0, 1<<40, 1<<40), pad), `tensor "w" has dimensions whose product overflows`},
		{"dimension over int64", header(3, 1, 0, tensorInfo("w", 0, 0, 1<<63), pad), "overflows"},
		{"tensor too large", header(3, 1, 0, tensorInfo("w", 28, 0, 1<<61, 2), pad), `tensor "w" is larger than a file can be`},
		{"unknown ggml type", header(3, 1, 0, tensorInfo("w", 4, 0, 32), pad), "ggml type 4, which this build does not know"},
		{"rows not whole blocks", header(3, 1, 0, tensorInfo("w", 12, 0, 100), pad), `tensor "w" is Q4_K, whose blocks hold 256 elements, but its rows hold 100`},
		{"duplicate tensor", header(3, 2, 0, tensorInfo("w", 0, 0, 1), tensorInfo("w", 0, 32, 1), pad), `tensor "w" appears twice`},
		{"long tensor name", header(3, 1, 0, tensorInfo(strings.Repeat("n", 300), 0, 0, 1), pad), "a tensor name is 300 bytes long"},
		{"misaligned data", header(3, 1, 0, tensorInfo("w", 0, 4, 1), pad), `tensor "w" starts at offset 4, not a multiple of the alignment 32`},
		{"data past the end", header(3, 1, 0, tensorInfo("w", 0, 0, 1<<40), pad), `tensor "w" (4398046511104 bytes at data offset 0) ends past the end of the file`},
		{"offset past the end", header(3, 1, 0, tensorInfo("w", 0, 1<<62, 1), pad), "ends past the end of the file"},
		{"no data section", header(3, 1, 0, tensorInfo("w", 0, 0, 1)), "the file ends before its tensor data starts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.b)
			var fe *gguf.Error
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want a gguf.Error containing %q", err, tc.want)
			}
		})
	}
}

// TestCutShort: a valid file cut at any byte of its header or data is an
// error, never a panic or a header read past what is there.
func TestCutShort(t *testing.T) {
	b, err := gguftest.Tiny().File().Bytes()
	if err != nil {
		t.Fatal(err)
	}
	full, err := parse(t, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 3, 4, 8, 16, 24, 30, 100, 1000, int(full.DataOffset) - 1, int(full.DataOffset), len(b) - 1} {
		if _, err := parse(t, b[:n]); err == nil {
			t.Errorf("cut at %d of %d: no error", n, len(b))
		}
	}
	for n := range int(full.DataOffset) {
		parse(t, b[:n]) // must not panic
	}
}

// TestReadFile: a FIFO is refused without waiting for a writer; a file
// cut short says so with its name; an 8B-parameter model written sparse
// reads in full.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.gguf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := gguf.ReadFile(fifo); done <- err }()
	select {
	case err := <-done:
		var nr *boundedfile.NotRegularError
		if !errors.As(err, &nr) {
			t.Errorf("ReadFile(FIFO) = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadFile(FIFO) blocked")
	}

	big := filepath.Join(dir, "llama3.gguf")
	m := gguftest.Llama3_8B()
	if err := m.File().Write(big); err != nil {
		t.Fatal(err)
	}
	h, err := gguf.ReadFile(big)
	if err != nil {
		t.Fatal(err)
	}
	if h.Params() != 8030261248 {
		t.Errorf("Llama-3-8B: %d parameters", h.Params())
	}
	if tt := h.TensorTypes(); tt["Q4_K"] != 32*7+2 || tt["F32"] != 65 {
		t.Errorf("tensor types %v", tt)
	}
	if err := os.Truncate(big, h.Size-1); err != nil {
		t.Fatal(err)
	}
	_, err = gguf.ReadFile(big)
	if err == nil || !strings.HasPrefix(err.Error(), "llama3.gguf is not a usable GGUF file: tensor \"output.weight\"") {
		t.Errorf("cut short: %v", err)
	}
}

// TestFileTypeNames: general.file_type by llama.cpp's names.
func TestFileTypeNames(t *testing.T) {
	for ft, want := range map[uint32]string{0: "ALL_F32", 1: "F16", 15: "Q4_K_M", 7: "Q8_0", 32: "BF16", 5: "file type 5", math.MaxUint32: "file type 4294967295"} {
		if got := gguf.FileTypeName(ft); got != want {
			t.Errorf("file type %d = %q, want %q", ft, got, want)
		}
	}
}
