package main

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// mknpzCmd writes an .npz (numpy.savez's layout, deflated members) a script
// needs: mknpz FILE MEMBER=SPEC..., each SPEC one of
//
//	DESCR:SHAPE[:VALUES]  an array: DESCR |u1 <i8 <i4 <f4, SHAPE 5x8x8,
//	                      VALUES a comma list repeated over it (else zeros)
//	pickle                an object array, as numpy pickles one
//	bomb:N                the first bytes of a deflated N-byte uint8 array
//	                      whose zip entry claims all N (never expanded)
func mknpzCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: mknpz FILE MEMBER=SPEC...")
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, a := range args[1:] {
		name, spec, ok := strings.Cut(a, "=")
		if !ok {
			ts.Fatalf("mknpz: %q is not MEMBER=SPEC", a)
		}
		data, claim, err := npzMember(spec)
		ts.Check(err)
		if claim == 0 {
			w, err := zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: zip.Deflate})
			ts.Check(err)
			w.Write(data)
			continue
		}
		var comp bytes.Buffer
		fw, _ := flate.NewWriter(&comp, flate.BestCompression)
		fw.Write(data)
		fw.Close()
		w, err := zw.CreateRaw(&zip.FileHeader{Name: name + ".npy", Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(data),
			CompressedSize64: uint64(comp.Len()), UncompressedSize64: claim})
		ts.Check(err)
		w.Write(comp.Bytes())
	}
	ts.Check(zw.Close())
	path := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(filepath.Dir(path), 0o755))
	ts.Check(os.WriteFile(path, buf.Bytes(), 0o644))
}

// npzMember is a member's bytes, and the size its zip entry claims (0:
// its own).
func npzMember(spec string) ([]byte, uint64, error) {
	if spec == "pickle" {
		return npyBytes("|O", "2", []byte("\x80\x04\x95\x10\x00cos\nsystem\n")), 0, nil
	}
	if n, ok := strings.CutPrefix(spec, "bomb:"); ok {
		size, err := strconv.ParseUint(n, 10, 64)
		if err != nil {
			return nil, 0, err
		}
		h := npyBytes("|u1", n+",", nil)
		return append(h, make([]byte, 1<<16)...), uint64(len(h)) + size, nil
	}
	parts := strings.SplitN(spec, ":", 3)
	if len(parts) < 2 {
		return nil, 0, fmt.Errorf("mknpz: %q is not DESCR:SHAPE[:VALUES]", spec)
	}
	descr, dims := parts[0], strings.Split(parts[1], "x")
	elems := 1
	for _, d := range dims {
		n, err := strconv.Atoi(d)
		if err != nil {
			return nil, 0, err
		}
		elems *= n
	}
	var vals []float64
	if len(parts) == 3 {
		for _, v := range strings.Split(parts[2], ",") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, 0, err
			}
			vals = append(vals, f)
		}
	}
	var data []byte
	for i := range elems {
		v := 0.0
		if len(vals) > 0 {
			v = vals[i%len(vals)]
		}
		switch descr {
		case "|u1":
			data = append(data, byte(v))
		case "<i8":
			data = binary.LittleEndian.AppendUint64(data, uint64(int64(v)))
		case "<i4":
			data = binary.LittleEndian.AppendUint32(data, uint32(int32(v)))
		case "<f4":
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(v)))
		default:
			return nil, 0, fmt.Errorf("mknpz: dtype %q (|u1 <i8 <i4 <f4)", descr)
		}
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	return npyBytes(descr, shape, data), 0, nil
}

// npyBytes is a .npy (format 1.0) of the header numpy writes, then data.
func npyBytes(descr, shape string, data []byte) []byte {
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape)
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(append(b, h...), data...)
}
