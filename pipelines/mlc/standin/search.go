package standin

import (
	"encoding/binary"
	"math"
)

// SearchQuantize is the native converter's `--scales mse` on MLC's
// storage (mlc_native.py search_scales, written again here so the
// stand-in does what it is asked): per group of 32, the scale's sign
// follows the largest-magnitude weight, candidate divisors 6.8..8.6 of it
// are each refitted by least squares on their codes and rounded to the
// stored dtype (float16, or bfloat16 for q4f32_1), and the one with the
// least squared error is kept; codes are 0..15, decoded as (q - 7) * scale
// like every MLC q4 weight. Arithmetic is float32 throughout.
func SearchQuantize(rows [][]float32, cols int, f32 bool) (qweight, qscale []byte) {
	const group, perWord, maxInt = 32, 8, 7
	words := (cols + perWord - 1) / perWord
	groups := (cols + group - 1) / group
	qweight = make([]byte, 4*words*len(rows))
	qscale = make([]byte, 2*groups*len(rows))
	store := func(s float32) (float32, uint16) {
		if f32 {
			b := F32ToBF16(s)
			return math.Float32frombits(uint32(b) << 16), b
		}
		h := F32ToF16(s)
		return F16ToF32(h), h
	}
	codes := func(g []float32, scale float32, out []float32) {
		for i, w := range g {
			out[i] = 0
			if scale != 0 {
				out[i] = float32(min(max(math.RoundToEven(float64(w/scale)), -maxInt), maxInt+1))
			}
		}
	}
	q := make([]uint32, words*perWord)
	var c [group]float32
	for r, row := range rows {
		clear(q)
		for g := 0; g < groups; g++ {
			lo, hi := g*group, min((g+1)*group, cols)
			grp := row[lo:hi]
			var peak float32
			for _, w := range grp {
				if math.Abs(float64(w)) > math.Abs(float64(peak)) {
					peak = w
				}
			}
			bestErr, bestScale, bestBits := float32(math.Inf(1)), float32(0), uint16(0)
			for i := -12; i <= 6; i++ {
				codes(grp, peak/(8+0.1*float32(i)), c[:len(grp)])
				var num, den float32
				for k, w := range grp {
					num += w * c[k]
					den += c[k] * c[k]
				}
				fit := float32(0)
				if den > 0 {
					fit = num / den
				}
				scale, bits := store(fit)
				codes(grp, scale, c[:len(grp)])
				var e float32
				for k, w := range grp {
					d := c[k]*scale - w
					e += d * d
				}
				if e < bestErr {
					bestErr, bestScale, bestBits = e, scale, bits
				}
			}
			binary.LittleEndian.PutUint16(qscale[2*(r*groups+g):], bestBits)
			codes(grp, bestScale, c[:len(grp)])
			for k := range grp {
				q[lo+k] = uint32(c[k] + maxInt)
			}
		}
		packRow(qweight, q, r, words)
	}
	return qweight, qscale
}
