package standin

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// decodeQ4 is how every MLC runtime reads a q4 weight: (q - 7) * scale.
func decodeQ4(qweight, qscale []byte, rows, cols int, f32 bool) [][]float32 {
	words, groups := (cols+7)/8, (cols+31)/32
	out := make([][]float32, rows)
	for r := range out {
		out[r] = make([]float32, cols)
		for c := 0; c < cols; c++ {
			word := binary.LittleEndian.Uint32(qweight[4*(r*words+c/8):])
			q := float32(word >> (4 * (c % 8)) & 0xF)
			bits := binary.LittleEndian.Uint16(qscale[2*(r*groups+c/32):])
			scale := F16ToF32(bits)
			if f32 {
				scale = math.Float32frombits(uint32(bits) << 16)
			}
			out[r][c] = (q - 7) * scale
		}
	}
	return out
}

func groupErrors(want, got [][]float32, cols int) []float64 {
	var errs []float64
	for r := range want {
		for lo := 0; lo < cols; lo += 32 {
			var e float64
			for c := lo; c < min(lo+32, cols); c++ {
				d := float64(got[r][c] - want[r][c])
				e += d * d
			}
			errs = append(errs, e)
		}
	}
	return errs
}

// The searched scales must never be worse than mlc_llm's max_abs / 7 on
// any group (max_abs / 7 is among the candidates the search refits), and
// clearly better over a whole tensor with skewed groups like a real
// checkpoint's (one large weight, an asymmetric spread).
func TestSearchQuantizeBeatsMaxAbs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 64, 200 // a partial last group too
	w := make([][]float32, rows)
	for r := range w {
		w[r] = make([]float32, cols)
		for c := range w[r] {
			w[r][c] = float32(rng.NormFloat64()*0.02 + 0.01*rng.ExpFloat64())
		}
		w[r][rng.IntN(cols)] = -0.2 // an outlier in one group per row
	}
	for _, f32 := range []bool{false, true} {
		var baseW, baseS []byte
		if f32 {
			baseW, baseS = Q4F32Quantize(w, cols)
		} else {
			baseW, baseS = Q4F16Quantize(w, cols)
		}
		sw, ss := SearchQuantize(w, cols, f32)
		base := groupErrors(w, decodeQ4(baseW, baseS, rows, cols, f32), cols)
		searched := groupErrors(w, decodeQ4(sw, ss, rows, cols, f32), cols)
		var sumBase, sumSearch float64
		for i := range base {
			// 1e-12: float16 rounding of the refitted scale can cost a hair
			// on a group where max_abs / 7 was already the least-squares fit.
			if searched[i] > base[i]*1.0001+1e-12 {
				t.Errorf("f32=%v group %d: searched error %.3g > max_abs/7 error %.3g", f32, i, searched[i], base[i])
			}
			sumBase += base[i]
			sumSearch += searched[i]
		}
		if ratio := sumSearch / sumBase; ratio > 0.85 {
			t.Errorf("f32=%v: searched scales' squared error is %.2f of max_abs/7's, want clearly less", f32, ratio)
		} else {
			t.Logf("f32=%v: squared error %.3f of max_abs/7's", f32, ratio)
		}
	}
}
