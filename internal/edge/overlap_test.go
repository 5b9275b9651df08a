package edge

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/npz"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

// words is n pseudo-random words of a fixed seed: text no other call
// repeats.
func words(seed uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "w%d ", rng.IntN(1_000_000))
		if i%12 == 11 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func overlap(t *testing.T, cal, ev string) bool {
	t.Helper()
	got, err := textOverlap(strings.NewReader(cal), strings.NewReader(ev))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestTextOverlap: the rule is a 256-byte stretch of the evaluation text
// in the calibration text, whitespace runs as one space, wherever the
// stretch falls (chunk boundaries of the streamed calibration included).
func TestTextOverlap(t *testing.T) {
	ev := words(1, 2000)
	other := words(2, 2000)
	if overlap(t, other, ev) {
		t.Error("two unrelated texts overlap")
	}
	if !overlap(t, ev, ev) {
		t.Error("a text does not overlap itself")
	}
	// 300 bytes of the evaluation text, rewrapped and indented, in the
	// middle of 3 MB of other text: across the 1 MiB chunks too.
	piece := ev[5000:5300]
	rewrapped := strings.ReplaceAll(strings.ReplaceAll(piece, " ", "  "), "\n", "\n\t")
	big := words(3, 400_000)
	for _, at := range []int{0, 1 << 20, 1<<20 - 100, 2<<20 + 7, len(big)} {
		at = min(at, len(big))
		if !overlap(t, big[:at]+rewrapped+big[at:], ev) {
			t.Errorf("300 shared bytes at %d not found", at)
		}
	}
	// 200 shared bytes are under the window.
	if overlap(t, other+ev[5000:5200]+other, ev) {
		t.Error("200 shared bytes are overlap")
	}
	// A short evaluation text is compared whole; a tiny one not at all.
	if !overlap(t, other+"the whole short evaluation text"+other, "the whole short evaluation text") {
		t.Error("a short evaluation text inside the calibration text")
	}
	if overlap(t, "a b c d", "a b") {
		t.Error("a 3-byte text overlaps")
	}
}

// TestBuiltinDataDisjoint: the built-in calibration and evaluation sets,
// which checkOverlap does not compare, share nothing by its rule.
func TestBuiltinDataDisjoint(t *testing.T) {
	cal, _ := data.Bytes("calibration")
	ev, _ := data.Bytes("eval")
	if len(cal) == 0 || len(ev) == 0 || overlap(t, string(cal), string(ev)) {
		t.Errorf("builtin:calibration and builtin:eval overlap (%d, %d bytes)", len(cal), len(ev))
	}
	for _, pair := range [][2]string{{"digits-calibration", "digits-test"}, {"skimage-photos-calibration", "skimage-photos"}} {
		c, _ := data.Bytes(pair[0])
		e, _ := data.Bytes(pair[1])
		if msg := imageOverlap(&dataSet{r: strings.NewReader(string(c)), size: int64(len(c))}, &dataSet{r: strings.NewReader(string(e)), size: int64(len(e))}); msg != "" {
			t.Errorf("%s and %s %s", pair[0], pair[1], msg)
		}
	}
}

// TestCheckOverlap: the same bytes, shared text and shared images are
// refused at data:, unless allow_overlap says so.
func TestCheckOverlap(t *testing.T) {
	dir := t.TempDir()
	ev := words(4, 1000)
	writeFile(t, filepath.Join(dir, "eval.txt"), ev)
	writeFile(t, filepath.Join(dir, "copy.txt"), ev)
	writeFile(t, filepath.Join(dir, "mixed.txt"), words(5, 1000)+ev[100:500]+words(6, 1000))
	writeFile(t, filepath.Join(dir, "other.txt"), words(7, 1000))
	digits, _ := data.Bytes("digits-test")
	os.WriteFile(filepath.Join(dir, "digits.npz"), digits, 0o644)
	r := func(cal, ev string) *recipe.Recipe {
		return &recipe.Recipe{Path: filepath.Join(dir, "r.yaml"), Data: recipe.Data{Calibration: cal, Eval: ev, Pos: recipe.Pos{Line: 5, Col: 1}}}
	}
	for _, tc := range []struct {
		cal, ev, want string
	}{
		{"copy.txt", "eval.txt", "data.calibration copy.txt and data.eval eval.txt are the same bytes: the gate would score the model on what it was calibrated on"},
		{"eval.txt", "eval.txt", "are the same bytes"},
		{"mixed.txt", "eval.txt", "share text (a stretch of 256 bytes or more"},
		{"builtin:eval", "builtin:eval", "are the same bytes"},
		{"other.txt", "eval.txt", ""},
		{"builtin:calibration", "eval.txt", ""},
		{"missing.txt", "eval.txt", ""},
	} {
		d := checkOverlap(r(tc.cal, tc.ev))
		switch {
		case tc.want == "" && d != nil:
			t.Errorf("%s, %s: %v", tc.cal, tc.ev, d.Msg)
		case tc.want != "" && (d == nil || !strings.Contains(d.Msg, tc.want) || d.Pos.Line != 5 || !strings.Contains(d.Hint, "allow_overlap: true")):
			t.Errorf("%s, %s: %+v, want %q", tc.cal, tc.ev, d, tc.want)
		}
	}
	allowed := r("copy.txt", "eval.txt")
	allowed.Data.AllowOverlap = true
	if d := checkOverlap(allowed); d != nil {
		t.Errorf("allow_overlap: %v", d.Msg)
	}
	vision := r("digits.npz", "builtin:digits-test")
	vision.Task = recipe.TaskImageClassification
	if d := checkOverlap(vision); d == nil || !strings.Contains(d.Msg, "are the same bytes") {
		t.Errorf("a copy of digits-test: %+v", d)
	}
	vision.Data.Calibration = "builtin:digits-calibration"
	if d := checkOverlap(vision); d != nil {
		t.Errorf("digits calibration and test: %v", d.Msg)
	}
}

// TestImageOverlap: a calibration set holding 1% or more of the
// evaluation images, pixel for pixel, overlaps it; fewer do not.
func TestImageOverlap(t *testing.T) {
	b, _ := data.Bytes("digits-test")
	z, err := npz.Read(bytes.NewReader(b), int64(len(b)), []string{"images"}, npz.MaxImageSetBytes)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := z.Arrays["images"].Data()
	pixels, _ := io.ReadAll(rc)
	set := func(n int) *dataSet {
		b := imageSet(t, pixels[:n*64], n)
		return &dataSet{r: bytes.NewReader(b), size: int64(len(b))}
	}
	ev := &dataSet{r: bytes.NewReader(b), size: int64(len(b))}
	if msg := imageOverlap(set(20), ev); !strings.Contains(msg, "share images (20 of the 359 evaluation images are in the calibration set)") {
		t.Errorf("20 shared images: %q", msg)
	}
	if msg := imageOverlap(set(3), ev); msg != "" {
		t.Errorf("3 shared images (under 1%%): %q", msg)
	}
}

// imageSet is an .npz of n 8x8 images and zero labels.
func imageSet(t *testing.T, pixels []byte, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range []struct {
		name, descr, shape string
		data               []byte
	}{{"images", "|u1", fmt.Sprintf("%d, 8, 8", n), pixels}, {"labels", "<i8", fmt.Sprintf("%d,", n), make([]byte, 8*n)}} {
		h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }\n", m.descr, m.shape)
		w, _ := zw.Create(m.name + ".npy")
		w.Write(append(append([]byte{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, byte(len(h)), 0}, h...), m.data...))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
