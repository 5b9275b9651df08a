// Package gguftest writes GGUF files for tests: any metadata, any tensor
// infos, and tensor data of zeros that Write leaves sparse, so a test can
// hold an 8B-parameter model's file without writing gigabytes. It follows
// gguf.md, not edgepipe's reader, so the reader is checked against the
// format rather than against itself.
package gguftest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/gguf"
)

// KV is one metadata pair. Value's Go type picks the GGUF type: uint8,
// int8, uint16, int16, uint32, int32, float32, bool, string, uint64, int64,
// float64, or a slice of one of them (an array), or []any of slices (an
// array of arrays).
type KV struct {
	Key   string
	Value any
}

// Tensor is one tensor info; Offset 0 lays the tensors out one after the
// other, aligned, as llama.cpp writes them.
type Tensor struct {
	Name string
	Type string // ggml type name: "F32", "Q4_K", ...
	Dims []uint64
}

// File is a GGUF to write.
type File struct {
	Version uint32 // 0: 3
	KV      []KV
	Tensors []Tensor
	// Hostile headers, for tests of the reader: ClaimTensors, when set, is
	// the tensor count written instead of the real one; ClaimString, when
	// set, adds a last key whose string claims that many bytes and holds
	// none; Cut, when set, is the size the file is cut to (-1: the end of
	// the header, so no tensor data is there).
	ClaimTensors, ClaimString uint64
	Cut                       int64
}

const alignment = 32

// Header returns the file's bytes up to the start of the tensor data, and
// the size of the data.
func (f File) Header() ([]byte, int64, error) {
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString(gguf.Magic)
	version := f.Version
	if version == 0 {
		version = 3
	}
	le(version)
	nTensors, nKV := uint64(len(f.Tensors)), uint64(len(f.KV))
	if f.ClaimTensors > 0 {
		nTensors = f.ClaimTensors
	}
	if f.ClaimString > 0 {
		nKV++
	}
	le(nTensors)
	le(nKV)
	for _, kv := range f.KV {
		writeString(&b, kv.Key)
		if err := writeValue(&b, kv.Value, true); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", kv.Key, err)
		}
	}
	if f.ClaimString > 0 {
		writeString(&b, "gguftest.claim")
		le(uint32(gguf.TypeString))
		le(f.ClaimString)
	}
	var offset int64
	for _, t := range f.Tensors {
		typ, ok := gguf.TensorTypeByName(t.Type)
		if !ok {
			return nil, 0, fmt.Errorf("tensor %s: no ggml type %q", t.Name, t.Type)
		}
		block, size, _ := typ.BlockSize()
		elems := int64(1)
		for _, d := range t.Dims {
			elems *= int64(d)
		}
		writeString(&b, t.Name)
		le(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			le(d)
		}
		le(uint32(typ))
		le(uint64(offset))
		offset += pad(elems / block * size)
	}
	for b.Len()%alignment != 0 {
		b.WriteByte(0)
	}
	return b.Bytes(), offset, nil
}

func pad(n int64) int64 { return (n + alignment - 1) / alignment * alignment }

// Bytes is the whole file, tensor data (zeros) included: for small files.
func (f File) Bytes() ([]byte, error) {
	h, data, err := f.Header()
	if err != nil {
		return nil, err
	}
	b := append(h, make([]byte, data)...)
	return b[:f.size(int64(len(h)), int64(len(b)))], nil
}

// Write writes the file to path, the tensor data as a hole of zeros.
func (f File) Write(path string) error {
	h, data, err := f.Header()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, h, 0o644); err != nil {
		return err
	}
	return os.Truncate(path, f.size(int64(len(h)), int64(len(h))+data))
}

// size is the file's size after Cut.
func (f File) size(header, full int64) int64 {
	switch {
	case f.Cut < 0:
		return header
	case f.Cut > 0 && f.Cut < full:
		return f.Cut
	}
	return full
}

func writeString(b *bytes.Buffer, s string) {
	binary.Write(b, binary.LittleEndian, uint64(len(s)))
	b.WriteString(s)
}

// writeValue writes v's type (when withType) and its value.
func writeValue(b *bytes.Buffer, v any, withType bool) error {
	t, ok := typeOf(v)
	if !ok {
		return fmt.Errorf("no GGUF type for %T", v)
	}
	if withType {
		binary.Write(b, binary.LittleEndian, uint32(t))
	}
	switch x := v.(type) {
	case string:
		writeString(b, x)
	case bool:
		if x {
			b.WriteByte(1)
		} else {
			b.WriteByte(0)
		}
	case []string:
		return writeArray(b, gguf.TypeString, len(x), func(i int) any { return x[i] })
	case []any:
		if len(x) == 0 {
			return writeArray(b, gguf.TypeUint8, 0, nil)
		}
		et, _ := typeOf(x[0])
		return writeArray(b, et, len(x), func(i int) any { return x[i] })
	default:
		if s, ok := slice(v); ok {
			return writeArray(b, s.elem, s.n, s.at)
		}
		binary.Write(b, binary.LittleEndian, v)
	}
	return nil
}

func writeArray(b *bytes.Buffer, elem gguf.ValueType, n int, at func(int) any) error {
	binary.Write(b, binary.LittleEndian, uint32(elem))
	binary.Write(b, binary.LittleEndian, uint64(n))
	for i := range n {
		if err := writeValue(b, at(i), false); err != nil {
			return err
		}
	}
	return nil
}

type sliceOf struct {
	elem gguf.ValueType
	n    int
	at   func(int) any
}

func slice(v any) (sliceOf, bool) {
	switch x := v.(type) {
	case []uint8:
		return sliceOf{gguf.TypeUint8, len(x), func(i int) any { return x[i] }}, true
	case []int8:
		return sliceOf{gguf.TypeInt8, len(x), func(i int) any { return x[i] }}, true
	case []uint16:
		return sliceOf{gguf.TypeUint16, len(x), func(i int) any { return x[i] }}, true
	case []int16:
		return sliceOf{gguf.TypeInt16, len(x), func(i int) any { return x[i] }}, true
	case []uint32:
		return sliceOf{gguf.TypeUint32, len(x), func(i int) any { return x[i] }}, true
	case []int32:
		return sliceOf{gguf.TypeInt32, len(x), func(i int) any { return x[i] }}, true
	case []float32:
		return sliceOf{gguf.TypeFloat32, len(x), func(i int) any { return x[i] }}, true
	case []bool:
		return sliceOf{gguf.TypeBool, len(x), func(i int) any { return x[i] }}, true
	case []uint64:
		return sliceOf{gguf.TypeUint64, len(x), func(i int) any { return x[i] }}, true
	case []int64:
		return sliceOf{gguf.TypeInt64, len(x), func(i int) any { return x[i] }}, true
	case []float64:
		return sliceOf{gguf.TypeFloat64, len(x), func(i int) any { return x[i] }}, true
	}
	return sliceOf{}, false
}

func typeOf(v any) (gguf.ValueType, bool) {
	switch v.(type) {
	case uint8:
		return gguf.TypeUint8, true
	case int8:
		return gguf.TypeInt8, true
	case uint16:
		return gguf.TypeUint16, true
	case int16:
		return gguf.TypeInt16, true
	case uint32:
		return gguf.TypeUint32, true
	case int32:
		return gguf.TypeInt32, true
	case float32:
		return gguf.TypeFloat32, true
	case bool:
		return gguf.TypeBool, true
	case string:
		return gguf.TypeString, true
	case uint64:
		return gguf.TypeUint64, true
	case int64:
		return gguf.TypeInt64, true
	case float64:
		return gguf.TypeFloat64, true
	case []string, []any:
		return gguf.TypeArray, true
	}
	_, ok := slice(v)
	return gguf.TypeArray, ok
}

// Model is a Llama-style decoder to write as a GGUF: the metadata llama.cpp
// writes for one (architecture, block count, widths, head counts, context,
// vocabulary, file type) and its tensors: token embedding, per block the
// attention and gated-MLP weights and two norms, the output norm, and an
// output head unless Tied.
type Model struct {
	Arch                                      string // default "llama"
	Layers, Hidden, Heads, KVHeads, FF, Vocab int
	Context                                   int
	Tied                                      bool
	FileType                                  string // "Q4_K_M"; "" writes no general.file_type
	WeightType                                string // the 2-D weights' type; default F16
	Split                                     [2]int // split.no (0-based) and split.count; zero: not split
	Extra                                     []KV
	// ClaimTensors, ClaimString and Cut make the file hostile (File's).
	ClaimTensors, ClaimString uint64
	Cut                       int64
}

// Tiny is a small Llama-shaped model: every 2-D weight Q8_0, rows of 256.
func Tiny() Model {
	return Model{Layers: 2, Hidden: 256, Heads: 4, KVHeads: 2, FF: 512, Vocab: 256, Context: 2048,
		FileType: "Q8_0", WeightType: "Q8_0"}
}

// Llama3_8B is Llama-3-8B's shape (8,030,261,248 parameters) at Q4_K.
func Llama3_8B() Model {
	return Model{Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FF: 14336, Vocab: 128256, Context: 8192,
		FileType: "Q4_K_M", WeightType: "Q4_K"}
}

// File is the model as a GGUF.
func (m Model) File() File {
	arch := m.Arch
	if arch == "" {
		arch = "llama"
	}
	wt := m.WeightType
	if wt == "" {
		wt = "F16"
	}
	h, ff, v := uint64(m.Hidden), uint64(m.FF), uint64(m.Vocab)
	headDim := uint64(m.Hidden / max(m.Heads, 1))
	kv := []KV{
		{"general.architecture", arch},
		{"general.name", "gguftest " + arch},
		{arch + ".block_count", uint32(m.Layers)},
		{arch + ".context_length", uint32(m.Context)},
		{arch + ".embedding_length", uint32(m.Hidden)},
		{arch + ".feed_forward_length", uint32(m.FF)},
		{arch + ".attention.head_count", uint32(m.Heads)},
		{arch + ".attention.head_count_kv", uint32(m.KVHeads)},
		{arch + ".attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.tokens", tokens(m.Vocab)},
	}
	if m.FileType != "" {
		ft, _ := gguf.FileTypeByName(m.FileType)
		kv = append(kv, KV{"general.file_type", ft})
	}
	if m.Split[1] > 0 {
		kv = append(kv, KV{"split.no", uint16(m.Split[0])}, KV{"split.count", uint16(m.Split[1])},
			KV{"split.tensors.count", int32(0)})
	}
	for _, e := range m.Extra { // a key already written takes its new value
		if i := slices.IndexFunc(kv, func(x KV) bool { return x.Key == e.Key }); i >= 0 {
			kv[i] = e
		} else {
			kv = append(kv, e)
		}
	}
	ts := []Tensor{{"token_embd.weight", wt, []uint64{h, v}}}
	for l := range m.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			Tensor{p + "attn_norm.weight", "F32", []uint64{h}},
			Tensor{p + "attn_q.weight", wt, []uint64{h, uint64(m.Heads) * headDim}},
			Tensor{p + "attn_k.weight", wt, []uint64{h, uint64(m.KVHeads) * headDim}},
			Tensor{p + "attn_v.weight", wt, []uint64{h, uint64(m.KVHeads) * headDim}},
			Tensor{p + "attn_output.weight", wt, []uint64{uint64(m.Heads) * headDim, h}},
			Tensor{p + "ffn_norm.weight", "F32", []uint64{h}},
			Tensor{p + "ffn_gate.weight", wt, []uint64{h, ff}},
			Tensor{p + "ffn_up.weight", wt, []uint64{h, ff}},
			Tensor{p + "ffn_down.weight", wt, []uint64{ff, h}},
		)
	}
	ts = append(ts, Tensor{"output_norm.weight", "F32", []uint64{h}})
	if !m.Tied {
		ts = append(ts, Tensor{"output.weight", wt, []uint64{h, v}})
	}
	return File{KV: kv, Tensors: ts, ClaimTensors: m.ClaimTensors, ClaimString: m.ClaimString, Cut: m.Cut}
}

// Params is the model's parameter count.
func (m Model) Params() int64 {
	var n int64
	for _, t := range m.File().Tensors {
		e := int64(1)
		for _, d := range t.Dims {
			e *= int64(d)
		}
		n += e
	}
	return n
}

func tokens(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("<t%d>", i)
	}
	return out
}

// Parse reads a model spec of KEY=VALUE words (layers=2 hidden=256 ...,
// file_type=Q4_K_M weights=Q4_K split=1/3 tied=true arch=gemma3
// kv=KEY:TYPE:VALUE, and the hostile claim_tensors=N claim_string=N
// cut=SIZE|header), starting from Tiny, or from Llama3_8B with preset=llama3-8b
// first.
func Parse(words []string) (Model, error) {
	m := Tiny()
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			return m, fmt.Errorf("%q is not KEY=VALUE", w)
		}
		if err := m.set(k, v); err != nil {
			return m, fmt.Errorf("%s: %w", w, err)
		}
	}
	return m, nil
}

func (m *Model) set(k, v string) error {
	ints := map[string]*int{"layers": &m.Layers, "hidden": &m.Hidden, "heads": &m.Heads, "kv_heads": &m.KVHeads,
		"ff": &m.FF, "vocab": &m.Vocab, "context": &m.Context}
	if p, ok := ints[k]; ok {
		_, err := fmt.Sscan(v, p)
		return err
	}
	switch k {
	case "preset":
		if v != "llama3-8b" {
			return fmt.Errorf("no preset %q (llama3-8b)", v)
		}
		*m = Llama3_8B()
	case "arch":
		m.Arch = v
	case "file_type":
		m.FileType = v
	case "weights":
		m.WeightType = v
	case "tied":
		m.Tied = v == "true"
	case "split":
		if _, err := fmt.Sscanf(v, "%d/%d", &m.Split[0], &m.Split[1]); err != nil {
			return err
		}
		m.Split[0]-- // split.no counts from 0, file names from 1
	case "claim_tensors":
		_, err := fmt.Sscan(v, &m.ClaimTensors)
		return err
	case "claim_string":
		_, err := fmt.Sscan(v, &m.ClaimString)
		return err
	case "cut":
		if v == "header" {
			m.Cut = -1
			return nil
		}
		_, err := fmt.Sscan(v, &m.Cut)
		return err
	case "kv":
		kv, err := parseKV(v)
		if err != nil {
			return err
		}
		m.Extra = append(m.Extra, kv)
	default:
		return fmt.Errorf("unknown key %q", k)
	}
	return nil
}

// parseKV reads KEY:TYPE:VALUE with TYPE one of u8 u16 u32 u64 i32 i64 f32
// str bool.
func parseKV(s string) (KV, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return KV{}, fmt.Errorf("%q is not KEY:TYPE:VALUE", s)
	}
	key, typ, val := parts[0], parts[1], parts[2]
	var n uint64
	var i int64
	var f float64
	switch typ {
	case "str":
		return KV{key, val}, nil
	case "bool":
		return KV{key, val == "true"}, nil
	case "u8", "u16", "u32", "u64":
		if _, err := fmt.Sscan(val, &n); err != nil {
			return KV{}, err
		}
		return KV{key, map[string]any{"u8": uint8(n), "u16": uint16(n), "u32": uint32(n), "u64": n}[typ]}, nil
	case "i32", "i64":
		if _, err := fmt.Sscan(val, &i); err != nil || i < math.MinInt32 && typ == "i32" {
			return KV{}, fmt.Errorf("bad %s %q", typ, val)
		}
		return KV{key, map[string]any{"i32": int32(i), "i64": i}[typ]}, nil
	case "f32":
		if _, err := fmt.Sscan(val, &f); err != nil {
			return KV{}, err
		}
		return KV{key, float32(f)}, nil
	}
	return KV{}, fmt.Errorf("unknown type %q", typ)
}
