package standin

import (
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestQ4F16Packing(t *testing.T) {
	// One group of 32: max |w| = 7 gives scale 1, so q = w + 7 exactly.
	row := make([]float32, 32)
	for i := range row {
		row[i] = float32(i%15) - 7
	}
	qw, qs := Q4F16Quantize([][]float32{row}, 32)
	if got := F16ToF32(binary.LittleEndian.Uint16(qs)); got != 1 {
		t.Fatalf("scale %v, want 1", got)
	}
	// Element r of a word sits at bits 4r..4r+3.
	w0 := binary.LittleEndian.Uint32(qw)
	for r := 0; r < 8; r++ {
		if q := (w0 >> (4 * r)) & 0xf; q != uint32(r%15) {
			t.Fatalf("element %d: q %d, want %d", r, q, r%15)
		}
	}
	for c, v := range Q4F16Dequantize(qw, qs, 0, 32) {
		if v != row[c] {
			t.Fatalf("element %d dequantizes to %v, want %v", c, v, row[c])
		}
	}
}

func TestQ4F16Error(t *testing.T) {
	const cols = 96
	rows := make([][]float32, 3)
	for r := range rows {
		rows[r] = make([]float32, cols)
		for c := range rows[r] {
			rows[r][c] = float32(math.Sin(float64(r*cols+c))) * 0.05
		}
	}
	qw, qs := Q4F16Quantize(rows, cols)
	for r := range rows {
		deq := Q4F16Dequantize(qw, qs, r, cols)
		for c, v := range deq {
			s := F16ToF32(binary.LittleEndian.Uint16(qs[2*(r*3+c/32):]))
			if d := math.Abs(float64(v - rows[r][c])); d > float64(s)*0.5+1e-4 {
				t.Fatalf("row %d col %d: error %g over half a step (%g)", r, c, d, s/2)
			}
		}
	}
}

func TestF16RoundTrip(t *testing.T) {
	for _, f := range []float32{0, 1, -2.5, 65504, 6.1035156e-05, 5.9604645e-08, 0.1} {
		if got := F16ToF32(F32ToF16(f)); math.Abs(float64(got-f)) > math.Abs(float64(f))*1e-3 {
			t.Errorf("%v -> %v", f, got)
		}
	}
	if h := F32ToF16(1e6); h != 0x7c00 {
		t.Errorf("1e6 -> %#x, want +inf", h)
	}
}

// AWQ needs the imatrix pass's activations: the stand-in refuses it with
// any other scales or with GPTQ rounding, as mlc_native.py does, before it
// reads the model.
func TestNativeRefusesAWQWithoutImatrix(t *testing.T) {
	calib := filepath.Join(t.TempDir(), "calib.txt")
	if err := os.WriteFile(calib, []byte("some calibration words"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"convert-weight", "--model", t.TempDir(), "--quantization", "q4f16_1", "--out", t.TempDir(), "--awq", "on"}
	for _, extra := range [][]string{
		{"--scales", "mse"},
		{"--scales", "mlc"},
		{"--scales", "imatrix", "--calibration", calib, "--rounding", "gptq"},
	} {
		err := mlcNative(append(slices.Clone(base), extra...), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--awq on needs --scales imatrix") {
			t.Errorf("%v: got %v, want the --awq precondition error", extra, err)
		}
	}
}
