// Package npz reads numpy's .npz files (a zip of .npy arrays) the way a
// validator must: it reads each array's .npy header (dtype, order, shape)
// from the first bytes of its member, checks that the member holds exactly
// the bytes the header says and that the total is under a cap, all before
// any array data is expanded; object arrays (pickled Python objects) are
// refused. A 389 KB compressed .npz claiming a 1.28 GB array is refused
// from its headers, not inflated to find out.
package npz

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
)

// Caps on what an archive may hold: a numpy.savez of a few arrays has a
// few members, and numpy itself refuses .npy headers over 10,000 bytes.
const (
	MaxMembers     = 1024
	MaxHeaderBytes = 64 << 10
	maxDims        = 32 // NPY_MAXDIMS
)

const npyMagic = "\x93NUMPY"

// Array is one .npy member: its dtype, order and shape, and where its
// data is.
type Array struct {
	Name string // the member's name without .npy, as np.load names it
	// Descr is numpy's dtype string ("<u1", "<i8", "|O"); Kind its kind
	// ('u', 'i', 'f', 'b', 'O', ...), ItemSize the bytes an element takes.
	Descr        string
	Kind         byte
	ItemSize     int64
	BigEndian    bool
	FortranOrder bool
	Shape        []int64
	// Elems is the product of Shape; DataBytes Elems x ItemSize.
	Elems, DataBytes int64
	headerBytes      int64
	member           *zip.File
}

// File is an open .npz.
type File struct {
	Arrays map[string]*Array
	closer io.Closer
}

// Error is an .npz that is not a usable set of arrays.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func fail(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Open opens the .npz at path (a regular file, opened without blocking)
// and reads the headers of the members named in arrays (without .npy;
// nil: every .npy member), refusing any whose data, with every other
// array read, would exceed limit bytes.
func Open(path string, arrays []string, limit int64) (*File, error) {
	f, fi, err := boundedfile.Open(path)
	if err != nil {
		return nil, err
	}
	out, err := Read(f, fi.Size(), arrays, limit)
	if err != nil {
		f.Close()
		return nil, err
	}
	out.closer = f
	return out, nil
}

// Read is Open for an .npz of size bytes read through r.
func Read(r io.ReaderAt, size int64, arrays []string, limit int64) (*File, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fail("it is not a zip archive as numpy.savez writes (%v)", err)
	}
	if len(zr.File) > MaxMembers {
		return nil, fail("it holds %d members, more than an image set has (at most %d)", len(zr.File), MaxMembers)
	}
	out := &File{Arrays: map[string]*Array{}}
	var total int64
	for _, m := range zr.File {
		name, isNpy := strings.CutSuffix(m.Name, ".npy")
		if !isNpy || arrays != nil && !contains(arrays, name) {
			continue
		}
		if _, dup := out.Arrays[name]; dup {
			return nil, fail("it holds %s twice", m.Name)
		}
		a, err := readHeader(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		a.Name = name
		if total += a.DataBytes; total > limit || total < 0 {
			return nil, fail("its arrays hold %s when expanded (%s is %v %s), more than the %s an image set may: use fewer images, or smaller ones",
				bytesText(total), m.Name, a.Shape, a.Descr, bytesText(limit))
		}
		out.Arrays[name] = a
	}
	return out, nil
}

// Close closes the file.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	return f.closer.Close()
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// readHeader reads a member's .npy header from its first bytes, and
// checks that the member's size is exactly the header's and the data's.
func readHeader(m *zip.File) (*Array, error) {
	switch m.Method {
	case zip.Store, zip.Deflate:
	default:
		return nil, fail("it is compressed with zip method %d; numpy.savez and savez_compressed write stored or deflated members", m.Method)
	}
	rc, err := m.Open()
	if err != nil {
		return nil, fail("it cannot be read from the zip (%v)", err)
	}
	defer rc.Close()
	pre := make([]byte, 10)
	if _, err := io.ReadFull(rc, pre[:8]); err != nil || string(pre[:6]) != npyMagic {
		return nil, fail("it is not a .npy array (no \\x93NUMPY magic)")
	}
	var hlen, skip int64
	switch pre[6] {
	case 1:
		if _, err := io.ReadFull(rc, pre[8:10]); err != nil {
			return nil, fail("its .npy header is cut short")
		}
		hlen, skip = int64(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(rc, b[:]); err != nil {
			return nil, fail("its .npy header is cut short")
		}
		hlen, skip = int64(binary.LittleEndian.Uint32(b[:])), 12
	default:
		return nil, fail(".npy format version %d.%d is not one numpy writes", pre[6], pre[7])
	}
	if hlen > MaxHeaderBytes {
		return nil, fail("its .npy header is %d bytes, more than numpy writes", hlen)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(rc, hdr); err != nil {
		return nil, fail("its .npy header is cut short")
	}
	a, err := parseHeader(string(hdr))
	if err != nil {
		return nil, err
	}
	a.headerBytes = skip + hlen
	a.member = m
	if want := uint64(a.headerBytes + a.DataBytes); m.UncompressedSize64 != want {
		return nil, fail("the member is %d bytes, but its header says %v %s, which is %d: it is cut short or padded",
			m.UncompressedSize64, a.Shape, a.Descr, want)
	}
	return a, nil
}

// parseHeader reads the Python dict literal of a .npy header:
// {'descr': '<u1', 'fortran_order': False, 'shape': (3, 8, 8), }.
func parseHeader(s string) (*Array, error) {
	p := &lit{s: s}
	fields, err := p.dict()
	if err != nil {
		return nil, fail("its .npy header is not one numpy writes (%v)", err)
	}
	a := &Array{}
	descr, ok := fields["descr"].(string)
	if !ok {
		if _, list := fields["descr"].([]any); list {
			return nil, fail("it is a structured array (a record dtype), not a plain array of numbers")
		}
		return nil, fail("its .npy header has no dtype (descr)")
	}
	order, ok := fields["fortran_order"].(bool)
	shape, okShape := fields["shape"].([]int64)
	if !ok || !okShape {
		return nil, fail("its .npy header lacks fortran_order or shape")
	}
	a.Descr, a.FortranOrder, a.Shape = descr, order, shape
	if err := a.dtype(); err != nil {
		return nil, err
	}
	if len(shape) > maxDims {
		return nil, fail("it has %d dimensions, more than numpy's %d", len(shape), maxDims)
	}
	a.Elems = 1
	for _, d := range shape {
		if d < 0 || d > 0 && a.Elems > (1<<62)/d {
			return nil, fail("its shape %v is not one an array can have", shape)
		}
		a.Elems *= d
	}
	if a.Elems > (1<<62)/max(a.ItemSize, 1) {
		return nil, fail("its shape %v is not one an array can have", shape)
	}
	a.DataBytes = a.Elems * a.ItemSize
	return a, nil
}

// dtype reads Descr: a byte order, a kind and an item size ("<i8").
func (a *Array) dtype() error {
	d := a.Descr
	if d == "" {
		return fail("its dtype is empty")
	}
	switch d[0] {
	case '<', '|', '=':
		d = d[1:]
	case '>':
		a.BigEndian, d = true, d[1:]
	}
	if d == "" {
		return fail("its dtype %q has no kind", a.Descr)
	}
	a.Kind = d[0]
	if a.Kind == 'O' {
		return fail("it holds Python objects (dtype object), which only unpickling can read, and unpickling runs code: save plain arrays of numbers")
	}
	n, err := strconv.Atoi(d[1:])
	if err != nil || n <= 0 || n > 64 {
		return fail("its dtype %q is not a plain number type", a.Descr)
	}
	a.ItemSize = int64(n)
	if a.Kind == 'U' { // counted in UCS-4 characters
		a.ItemSize *= 4
	}
	return nil
}

// Data streams the array's data, exactly DataBytes of it (the zip's own
// checksum is checked at the end).
func (a *Array) Data() (io.ReadCloser, error) {
	rc, err := a.member.Open()
	if err != nil {
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, rc, a.headerBytes); err != nil {
		rc.Close()
		return nil, err
	}
	return &exact{r: rc, left: a.DataBytes}, nil
}

// exact reads left bytes, then confirms the member ends there (which
// makes the zip reader check its CRC).
type exact struct {
	r    io.ReadCloser
	left int64
}

func (e *exact) Read(b []byte) (int, error) {
	if e.left <= 0 {
		var one [1]byte
		if n, err := e.r.Read(one[:]); n > 0 {
			return 0, errors.New("the member holds more than its header says")
		} else if err != nil && err != io.EOF {
			return 0, err
		}
		return 0, io.EOF
	}
	if int64(len(b)) > e.left {
		b = b[:e.left]
	}
	n, err := e.r.Read(b)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		return n, io.ErrUnexpectedEOF
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func (e *exact) Close() error { return e.r.Close() }

func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}

// lit parses the subset of Python literals a .npy header uses: a dict of
// string keys to strings, booleans, tuples of ints and lists (a record
// dtype, only recognized to be refused).
type lit struct {
	s string
	i int
}

func (p *lit) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *lit) eat(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *lit) dict() (map[string]any, error) {
	if !p.eat('{') {
		return nil, errors.New("no dict")
	}
	out := map[string]any{}
	for !p.eat('}') {
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if !p.eat(':') {
			return nil, errors.New("no ':' after a key")
		}
		v, err := p.value(0)
		if err != nil {
			return nil, err
		}
		out[k] = v
		if !p.eat(',') {
			if !p.eat('}') {
				return nil, errors.New("no ',' or '}' after a value")
			}
			break
		}
	}
	p.space()
	if p.i != len(p.s) {
		return nil, errors.New("text after the dict")
	}
	return out, nil
}

func (p *lit) str() (string, error) {
	p.space()
	if p.i >= len(p.s) || p.s[p.i] != '\'' && p.s[p.i] != '"' {
		return "", errors.New("no string")
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", errors.New("an unterminated string")
	}
	v := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return v, nil
}

func (p *lit) value(depth int) (any, error) {
	if depth > 4 {
		return nil, errors.New("nested too deep")
	}
	p.space()
	rest := p.s[p.i:]
	switch {
	case strings.HasPrefix(rest, "True"):
		p.i += 4
		return true, nil
	case strings.HasPrefix(rest, "False"):
		p.i += 5
		return false, nil
	case strings.HasPrefix(rest, "'"), strings.HasPrefix(rest, `"`):
		return p.str()
	case strings.HasPrefix(rest, "("):
		return p.tuple()
	case strings.HasPrefix(rest, "["):
		return p.list(depth)
	}
	return nil, errors.New("a value that is not a string, bool, tuple or list")
}

func (p *lit) tuple() ([]int64, error) {
	p.eat('(')
	out := []int64{}
	for !p.eat(')') {
		p.space()
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		n, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
		if err != nil {
			return nil, errors.New("a shape that is not whole numbers")
		}
		if len(out) > maxDims {
			return nil, errors.New("a shape of too many dimensions")
		}
		out = append(out, n)
		p.i = j
		if !p.eat(',') {
			if !p.eat(')') {
				return nil, errors.New("an unterminated shape")
			}
			break
		}
	}
	return out, nil
}

func (p *lit) list(depth int) ([]any, error) {
	p.eat('[')
	var out []any
	for !p.eat(']') {
		if p.eat('(') {
			p.i--
			if _, err := p.anyTuple(depth + 1); err != nil {
				return nil, err
			}
		} else if _, err := p.value(depth + 1); err != nil {
			return nil, err
		}
		out = append(out, nil)
		if !p.eat(',') {
			if !p.eat(']') {
				return nil, errors.New("an unterminated list")
			}
			break
		}
	}
	return out, nil
}

// anyTuple skips a tuple of any values (a record dtype's fields).
func (p *lit) anyTuple(depth int) ([]any, error) {
	p.eat('(')
	for !p.eat(')') {
		p.space()
		if p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
				p.i++
			}
		} else if _, err := p.value(depth + 1); err != nil {
			return nil, err
		}
		if !p.eat(',') {
			if !p.eat(')') {
				return nil, errors.New("an unterminated tuple")
			}
			break
		}
	}
	return nil, nil
}
