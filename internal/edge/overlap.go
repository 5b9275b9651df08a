package edge

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/npz"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

// A quality gate measured on the data a model was calibrated on flatters
// it: the importance matrix, GPTQ's Hessians or INT8 ranges were fitted to
// exactly those tokens or images. So calibration and evaluation data that
// overlap are refused unless the recipe says data: {allow_overlap: true}.
// The rule (docs/recipe.md's too):
//
//   - the two are the same bytes; or
//   - texts: some 256-byte stretch of the evaluation text appears in the
//     calibration text, whitespace runs counted as one space (of the
//     evaluation text, the first 64 MiB are compared: the gate scores the
//     text from its start);
//   - image sets: 1% or more of the evaluation images (at least one)
//     appear in the calibration set pixel for pixel.
const (
	overlapWindow     = 256
	overlapEvalBytes  = 64 << 20
	overlapImageShare = 0.01
)

// dataSet is a data reference opened for reading: a built-in set's bytes
// or a file.
type dataSet struct {
	ref  string
	r    io.ReaderAt
	size int64
	f    *os.File
}

func (d *dataSet) Close() {
	if d.f != nil {
		d.f.Close()
	}
}

func (d *dataSet) reader() io.Reader { return io.NewSectionReader(d.r, 0, d.size) }

// openData opens a data reference; a file that is not there is
// (nil, nil): the run reports it, with where it looked.
func openData(r *recipe.Recipe, ref string) (*dataSet, error) {
	if name, ok := strings.CutPrefix(ref, "builtin:"); ok {
		b, err := data.Bytes(name)
		if err != nil {
			return nil, err
		}
		return &dataSet{ref: ref, r: bytes.NewReader(b), size: int64(len(b))}, nil
	}
	f, fi, err := boundedfile.Open(dataPath(r, ref))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &dataSet{ref: ref, r: f, size: fi.Size(), f: f}, nil
}

// checkOverlap is the diagnostic for calibration data that overlaps the
// evaluation data, or nil.
func checkOverlap(r *recipe.Recipe) *recipe.Diagnostic {
	cal, ev := r.Data.Calibration, r.Data.Eval
	if r.Data.AllowOverlap || cal == "" || ev == "" ||
		strings.HasPrefix(cal, "builtin:") && strings.HasPrefix(ev, "builtin:") && cal != ev {
		return nil // the built-in sets are disjoint (their test says so)
	}
	diag := func(msg string) *recipe.Diagnostic {
		return &recipe.Diagnostic{Pos: r.Data.Pos,
			Msg:  fmt.Sprintf("data.calibration %s and data.eval %s %s: the gate would score the model on what it was calibrated on, and call it better than it is", cal, ev, msg),
			Hint: "calibrate and evaluate on different data (a train split and a test split), or, if the overlap is intended, say so with data: {allow_overlap: true}"}
	}
	var problems []string
	c, err := openData(r, cal)
	if err != nil {
		problems = append(problems, fmt.Sprintf("data.calibration %s: %v", cal, err))
	}
	e, err := openData(r, ev)
	if err != nil {
		problems = append(problems, fmt.Sprintf("data.eval %s: %v", ev, err))
	}
	if len(problems) > 0 {
		return &recipe.Diagnostic{Pos: r.Data.Pos, Msg: strings.Join(problems, "; "), Hint: "data files are regular files: put the file itself there"}
	}
	if c == nil || e == nil {
		return nil
	}
	defer c.Close()
	defer e.Close()
	if same, err := sameBytes(c, e); err == nil && same {
		return diag("are the same bytes")
	}
	if r.Traits().Images {
		if msg := imageOverlap(c, e); msg != "" {
			return diag(msg)
		}
		return nil
	}
	if overlap, err := textOverlap(c.reader(), e.reader()); err == nil && overlap {
		return diag(fmt.Sprintf("share text (a stretch of %d bytes or more of the evaluation text is in the calibration text)", overlapWindow))
	}
	return nil
}

func sameBytes(a, b *dataSet) (bool, error) {
	if a.size != b.size {
		return false, nil
	}
	ha, hb := sha256.New(), sha256.New()
	if _, err := io.Copy(ha, a.reader()); err != nil {
		return false, err
	}
	if _, err := io.Copy(hb, b.reader()); err != nil {
		return false, err
	}
	return bytes.Equal(ha.Sum(nil), hb.Sum(nil)), nil
}

// imageOverlap says how the sets share images, or "" when they do not (or
// cannot be read: CheckData reports that).
func imageOverlap(cal, ev *dataSet) string {
	ch, err := npz.ImageHashes(cal.r, cal.size)
	if err != nil {
		return ""
	}
	eh, err := npz.ImageHashes(ev.r, ev.size)
	if err != nil {
		return ""
	}
	seen := make(map[uint64]bool, len(ch))
	for _, h := range ch {
		seen[h] = true
	}
	shared := 0
	for _, h := range eh {
		if seen[h] {
			shared++
		}
	}
	if shared == 0 || float64(shared) < overlapImageShare*float64(len(eh)) {
		return ""
	}
	return fmt.Sprintf("share images (%d of the %d evaluation images are in the calibration set)", shared, len(eh))
}

// collapse reads text with every run of whitespace as one space, so the
// same text wrapped or indented differently still compares equal.
type collapse struct {
	r     *bufio.Reader
	space bool
}

func (c *collapse) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		ch, err := c.r.ReadByte()
		if err != nil {
			return n, err
		}
		if ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v' {
			if c.space {
				continue
			}
			c.space, ch = true, ' '
		} else {
			c.space = false
		}
		b[n] = ch
		n++
	}
	return n, nil
}

func collapsed(r io.Reader) io.Reader { return &collapse{r: bufio.NewReaderSize(r, 1<<16)} }

// The rolling hash over stride bytes (Rabin-Karp, modulo 2^64).
const rollBase = 1099511628211

// textOverlap reports whether some overlapWindow-byte stretch of the
// (collapsed) evaluation text appears in the (collapsed) calibration
// text. The evaluation text is indexed at every stride-th position by the
// hash of the stride bytes there (stride = window/2, so every stretch of
// window bytes holds one indexed piece whole); the calibration text is
// streamed past a rolling hash of stride bytes, and each hit is checked
// byte for byte, extended to either side.
func textOverlap(cal, eval io.Reader) (bool, error) {
	ev, err := io.ReadAll(io.LimitReader(collapsed(eval), overlapEvalBytes))
	if err != nil {
		return false, err
	}
	// An evaluation text shorter than the window is compared whole, down
	// to a line's worth: under that, only the same bytes are overlap.
	window := min(overlapWindow, len(ev))
	if window < 16 {
		return false, nil
	}
	stride := max(window/2, 1)
	index := map[uint64][]int{}
	// seen filters the calibration text's hashes before the map: most
	// miss, and a bit test is far cheaper than a lookup.
	seen := make([]uint64, 1<<16)
	for p := 0; p+stride <= len(ev); p += stride {
		h := hashBytes(ev[p : p+stride])
		if len(index[h]) < 4 { // a text repeating itself needs no more
			index[h] = append(index[h], p)
		}
		seen[h>>54] |= 1 << (h & 63)
	}
	s := &scanner{r: collapsed(cal), ev: ev, index: index, seen: seen, window: window, stride: stride}
	return s.run()
}

func hashBytes(b []byte) uint64 {
	var h uint64
	for _, c := range b {
		h = h*rollBase + uint64(c)
	}
	return h
}

// scanner streams the calibration text through a buffer that keeps the
// window's worth of bytes either side of the position it hashes.
type scanner struct {
	r              io.Reader
	ev             []byte
	index          map[uint64][]int
	seen           []uint64
	window, stride int
	buf            []byte
	base           int // the text offset of buf[0]
	eof            bool
}

func (s *scanner) fill() error {
	if s.eof {
		return nil
	}
	chunk := make([]byte, 1<<20)
	n, err := io.ReadFull(s.r, chunk)
	s.buf = append(s.buf, chunk[:n]...)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		s.eof = true
		return nil
	}
	return err
}

func (s *scanner) run() (bool, error) {
	if err := s.fill(); err != nil {
		return false, err
	}
	if len(s.buf) < s.stride {
		return false, nil
	}
	top := uint64(1) // rollBase^(stride-1)
	for range s.stride - 1 {
		top *= rollBase
	}
	h := hashBytes(s.buf[:s.stride])
	for q := 0; ; q++ {
		// Keep window bytes past the hashed piece in the buffer, and drop
		// what is more than a window behind it.
		for !s.eof && q+s.stride+s.window > s.base+len(s.buf) {
			if err := s.fill(); err != nil {
				return false, err
			}
		}
		if drop := q - s.window - s.base; drop > 1<<20 {
			s.buf = append([]byte(nil), s.buf[drop:]...)
			s.base += drop
		}
		if s.seen[h>>54]&(1<<(h&63)) != 0 {
			if ps, ok := s.index[h]; ok && s.matches(q, ps) {
				return true, nil
			}
		}
		if q+s.stride >= s.base+len(s.buf) {
			return false, nil
		}
		out, in := s.buf[q-s.base], s.buf[q+s.stride-s.base]
		h = (h-uint64(out)*top)*rollBase + uint64(in)
	}
}

// matches checks a hash hit at calibration offset q against the indexed
// evaluation offsets: the common run through the piece, extended to
// either side, must reach the window.
func (s *scanner) matches(q int, ps []int) bool {
	c := s.buf
	cq := q - s.base
	for _, p := range ps {
		if !bytes.Equal(c[cq:cq+s.stride], s.ev[p:p+s.stride]) {
			continue
		}
		left := 0
		for left < s.window-s.stride && cq-left > 0 && p-left > 0 && c[cq-left-1] == s.ev[p-left-1] {
			left++
		}
		right := 0
		for left+s.stride+right < s.window && cq+s.stride+right < len(c) && p+s.stride+right < len(s.ev) &&
			c[cq+s.stride+right] == s.ev[p+s.stride+right] {
			right++
		}
		if left+s.stride+right >= s.window {
			return true
		}
	}
	return false
}
