package catalog

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/suggest"
)

// ModelShape is what the KV cache size depends on.
type ModelShape struct {
	Layers  int   `json:"layers"`
	KVHeads int   `json:"kv_heads"`
	HeadDim int   `json:"head_dim"`
	Params  int64 `json:"params"`
}

// kvDtype is how one KV cache element is stored: blockBytes per block of
// blockElems elements. llama.cpp quantizes the cache in blocks of 32 along a
// row (ggml's block_q8_0 is 32 int8 + one fp16 scale = 34 bytes, block_q4_0
// 16 bytes of nibbles + the scale = 18 bytes).
type kvDtype struct{ blockElems, blockBytes int64 }

var kvDtypes = map[string]kvDtype{
	"f32":      {1, 4},
	"f16":      {1, 2},
	"bf16":     {1, 2},
	"fp8":      {1, 1}, // vLLM --kv-cache-dtype fp8 (E4M3); the per-tensor scale is negligible
	"fp8_e4m3": {1, 1},
	"fp8_e5m2": {1, 1},
	"q8_0":     {32, 34},
	"q5_1":     {32, 24},
	"q5_0":     {32, 22},
	"q4_1":     {32, 20},
	"q4_0":     {32, 18},
	"iq4_nl":   {32, 18},
}

// KVDtypes lists the KV cache types KVCacheBytes knows: llama.cpp's
// --cache-type-k/-v names and vLLM's --kv-cache-dtype fp8 names.
func KVDtypes() []string {
	names := make([]string, 0, len(kvDtypes))
	for n := range kvDtypes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// KVCacheBytes is the KV cache for context tokens:
// layers x 2 (K and V) x kv_heads x head_dim x context x bytes per element,
// with block-quantized types rounded up to whole blocks per row.
//
// Llama-3-8B (32 layers, 8 KV heads, head dim 128) at 32K tokens needs
// 4 GiB in f16. The domain brief's "2 GB of KV cache for 32K tokens" is that
// shape with an 8-bit cache (fp8: exactly 2 GiB; q8_0: 2.125 GiB), or a
// 16-layer model of the same width in f16.
func KVCacheBytes(s ModelShape, context int, kvDtype string) (int64, error) {
	t, ok := kvDtypes[kvDtype]
	if !ok {
		msg := fmt.Sprintf("unknown KV cache type %q", kvDtype)
		if hint := suggest.Closest(kvDtype, KVDtypes()); hint != "" {
			msg += fmt.Sprintf("; did you mean %q?", hint)
		}
		return 0, fmt.Errorf("%s; known types: %s", msg, strings.Join(KVDtypes(), ", "))
	}
	if s.Layers <= 0 || s.KVHeads <= 0 || s.HeadDim <= 0 {
		return 0, fmt.Errorf("model shape %+v: layers, kv_heads and head_dim must all be positive", s)
	}
	if context <= 0 {
		return 0, fmt.Errorf("context %d: must be a positive number of tokens", context)
	}
	rowElems := int64(s.KVHeads) * int64(s.HeadDim) // one token's K (or V) in one layer
	rowBytes := (rowElems + t.blockElems - 1) / t.blockElems * t.blockBytes
	if float64(s.Layers)*2*float64(context)*float64(rowBytes) > math.MaxInt64/2 {
		return 0, fmt.Errorf("model shape %+v at context %d: KV cache size overflows; check the numbers", s, context)
	}
	return int64(s.Layers) * 2 * int64(context) * rowBytes, nil
}

// Runtime overhead on top of weights and KV cache. The fixed part covers the
// runtime's code, its compute buffers for one decode batch (llama.cpp's
// compute buffer for an 8B model is a few hundred MB) and a GPU context; the
// proportional part covers allocator fragmentation and per-tensor scratch,
// which grow with the model. Estimates, not measurements: they keep a
// pre-flight check from passing a plan that only fits to the last byte.
const (
	RuntimeOverheadBaseGB   = 0.3
	RuntimeOverheadFraction = 0.05
)

// Fit is a memory pre-flight: does a model with this much KV cache fit in
// what the device leaves to applications?
type Fit struct {
	WeightsGB   float64 `json:"weights_gb"`
	KVGB        float64 `json:"kv_gb"`
	OverheadGB  float64 `json:"overhead_gb"`
	NeedGB      float64 `json:"need_gb"`
	AvailableGB float64 `json:"available_gb"` // memory_gb - os_reserved_gb
	Fits        bool    `json:"fits"`
}

// MemoryFit checks weightsGB of weights plus kvBytes of KV cache plus the
// runtime overhead against the device's memory less its OS reserve.
func MemoryFit(d Device, weightsGB float64, kvBytes int64) Fit {
	f := Fit{
		WeightsGB:   weightsGB,
		KVGB:        float64(kvBytes) / 1e9,
		OverheadGB:  RuntimeOverheadBaseGB + RuntimeOverheadFraction*weightsGB,
		AvailableGB: d.MemoryGB - d.OSReservedGB,
	}
	f.NeedGB = f.WeightsGB + f.KVGB + f.OverheadGB
	f.Fits = f.NeedGB <= f.AvailableGB
	return f
}
