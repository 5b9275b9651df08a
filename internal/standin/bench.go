package standin

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
)

// Stand-in timings are not measurements: they are a deterministic function
// of the model file's bytes and size, so a bigger model "decodes" slower,
// another model gives other numbers, and the same model gives the same
// numbers every time (the tests can pin budgets against them).
//
// A token costs a fixed overhead plus the model's bytes at a notional
// 20 GB/s; a prompt token a tenth of that (prompts are batched); each run
// varies by up to +30% by a hash of the model and the run's index.
const (
	standinBytesPerNS  = 20.0 // 20 GB/s
	standinTokenOverNS = 50_000
)

// RunTimings returns n timings of base ns, each varied by the model's
// digest, the run's index and salt (which test it is).
func RunTimings(sum [32]byte, salt string, base float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		h := sha256.New()
		h.Write(sum[:])
		fmt.Fprintf(h, "%s/%d", salt, i)
		var b [32]byte
		copy(b[:], h.Sum(nil))
		frac := float64(binary.LittleEndian.Uint64(b[:8])%1000) / 1000
		out[i] = float64(int64(base * (1 + 0.3*frac)))
	}
	return out
}

// ModelCost reads a model file whole and returns its digest and the
// stand-in cost of one decoded token in ns.
func ModelCost(path string) ([32]byte, float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return [32]byte{}, 0, err
	}
	return sha256.Sum256(b), standinTokenOverNS + float64(len(b))/standinBytesPerNS, nil
}
