package gguf_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/edgepipe/edgepipe/internal/gguf"
	"github.com/edgepipe/edgepipe/internal/gguf/gguftest"
)

// FuzzGGUFHeader: no input panics the header reader or makes it allocate
// by a count it has not checked against the input, and what it accepts is
// consistent: every tensor's data lies inside the input.
func FuzzGGUFHeader(f *testing.F) {
	if b, err := os.ReadFile("testdata/gguf-py.gguf"); err == nil {
		f.Add(b)
	}
	m := gguftest.Tiny()
	m.Layers, m.Vocab = 1, 32
	m.Extra = []gguftest.KV{{Key: "x.nested", Value: []any{[]int32{1}, []int32{2, 3}}}, {Key: "x.f", Value: 1.5}}
	if b, err := m.File().Bytes(); err == nil {
		f.Add(b)
	}
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := gguf.Parse(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		if h.DataOffset > int64(len(b)) && len(h.Tensors) > 0 {
			t.Fatalf("data offset %d past %d bytes", h.DataOffset, len(b))
		}
		for _, tn := range h.Tensors {
			if end := h.DataOffset + int64(tn.Offset) + tn.Bytes; end > int64(len(b)) || end < 0 {
				t.Fatalf("tensor %q ends at %d of %d bytes", tn.Name, end, len(b))
			}
		}
		if h.Params() < 0 {
			t.Fatalf("negative parameter count %d", h.Params())
		}
		h.TensorTypes()
		h.FileType()
	})
}
