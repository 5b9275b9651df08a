package edge

import (
	"fmt"
	"math/bits"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// DefaultContext is the context the pre-flight sizes the KV cache for when a
// target sets none: the domain brief keeps edge context at 4K-8K.
const DefaultContext = 4096

// minFixContext: a context shorter than this is not worth suggesting.
const minFixContext = 256

// Fix is one change to a target and what it would give.
type Fix struct {
	// Change is what to write in the recipe (or do): "context: 4096".
	Change string `json:"change"`
	// Effect gives the numbers the change leads to.
	Effect string `json:"effect"`
}

func (f Fix) String() string { return f.Change + " (" + f.Effect + ")" }

// MemoryCheck is the memory pre-flight of one model on one device: weights +
// KV cache + runtime overhead (catalog.MemoryFit) against the memory the
// device leaves to apps, or the target's own max_memory_gb when that is
// smaller.
type MemoryCheck struct {
	catalog.Fit
	Device       string  `json:"device"`
	DeviceGB     float64 `json:"device_gb"`
	OSReservedGB float64 `json:"os_reserved_gb"`
	// LimitGB is what the total must stay under.
	LimitGB float64 `json:"limit_gb"`
	// LimitIsBudget: LimitGB is the target's max_memory_gb, not the device.
	LimitIsBudget bool   `json:"limit_is_budget"`
	Context       int    `json:"context"`
	KVDtype       string `json:"kv_dtype"`
	Params        int64  `json:"params"`
	Format        string `json:"format"`
	// Fixes are set when the model does not fit.
	Fixes []Fix `json:"fixes,omitempty"`
}

// OK reports whether the total stays under the limit.
func (c MemoryCheck) OK() bool { return c.NeedGB <= c.LimitGB }

// CheckMemory runs the pre-flight for a model of the given shape stored in
// format f, with a KV cache for context tokens of kv (a recipe kv_dtype).
// maxMemoryGB, when positive, is a budget tighter than the device may be.
// When the model does not fit, the check carries the fixes, each with the
// numbers it would give.
func CheckMemory(d catalog.Device, shape catalog.ModelShape, f catalog.Format, context int, kv string, maxMemoryGB float64) (MemoryCheck, error) {
	if kv == "" {
		kv = DefaultKVDtype
	}
	c := MemoryCheck{Device: d.ID, DeviceGB: d.MemoryGB, OSReservedGB: d.OSReservedGB,
		Context: context, KVDtype: kv, Params: shape.Params, Format: f.Name}
	fit, err := fitAt(d, shape, f, context, kv)
	if err != nil {
		return c, err
	}
	c.Fit = fit
	c.LimitGB = fit.AvailableGB
	if maxMemoryGB > 0 && maxMemoryGB < c.LimitGB {
		c.LimitGB, c.LimitIsBudget = maxMemoryGB, true
	}
	if !c.OK() {
		c.Fixes = memoryFixes(d, shape, f, c)
	}
	return c, nil
}

func fitAt(d catalog.Device, shape catalog.ModelShape, f catalog.Format, context int, kv string) (catalog.Fit, error) {
	name, err := catalogKV(kv)
	if err != nil {
		return catalog.Fit{}, err
	}
	kvBytes, err := catalog.KVCacheBytes(shape, context, name)
	if err != nil {
		return catalog.Fit{}, err
	}
	return catalog.MemoryFit(d, catalog.EstimateWeightsGB(shape.Params, f), kvBytes), nil
}

// memoryFixes: the largest power-of-two context that fits; a quantized KV
// cache (at this context, else at the largest context it allows, when that
// beats the plain shorter context); a smaller model beside this KV cache.
func memoryFixes(d catalog.Device, shape catalog.ModelShape, f catalog.Format, c MemoryCheck) []Fix {
	var fixes []Fix
	plainCtx, plainFit := largestContext(d, shape, f, c.Context, c.KVDtype, c.LimitGB)
	if plainCtx > 0 {
		fixes = append(fixes, Fix{
			Change: fmt.Sprintf("context: %d", plainCtx),
			Effect: fmt.Sprintf("KV cache %s, total %s: the longest power-of-two context that fits", gb(plainFit.KVGB), gb(plainFit.NeedGB)),
		})
	}
	for _, kv := range quantizedKV {
		if kvBytesPerToken(shape, kv) >= kvBytesPerToken(shape, c.KVDtype) {
			continue
		}
		if fit, err := fitAt(d, shape, f, c.Context, kv); err == nil && fit.NeedGB <= c.LimitGB {
			fixes = append(fixes, Fix{
				Change: "kv_dtype: " + kv,
				Effect: fmt.Sprintf("KV cache %s at %d tokens, total %s", gb(fit.KVGB), c.Context, gb(fit.NeedGB)),
			})
			break
		}
		if ctx, fit := largestContext(d, shape, f, c.Context, kv, c.LimitGB); ctx > plainCtx {
			fixes = append(fixes, Fix{
				Change: fmt.Sprintf("kv_dtype: %s with context: %d", kv, ctx),
				Effect: fmt.Sprintf("KV cache %s, total %s", gb(fit.KVGB), gb(fit.NeedGB)),
			})
		}
	}
	if p := maxParamsBeside(c.LimitGB, c.KVGB, f); p > 0 && shape.Params > 0 {
		fixes = append(fixes, Fix{
			Change: "a smaller model",
			Effect: fmt.Sprintf("at most %s parameters in %s, %s of weights, fit beside this %s KV cache; a smaller model's KV cache is usually smaller too",
				paramsAtMost(p), f.Name, gb(catalog.EstimateWeightsGB(p, f)), gb(c.KVGB)),
		})
	}
	if w := maxWeightsBeside(c.LimitGB, c.KVGB); w > 0 && shape.Params > 0 {
		if alt, ok := fewerBits(d, f, w*1e9*8/float64(shape.Params)); ok {
			fit, _ := fitAt(d, shape, alt, c.Context, c.KVDtype)
			fixes = append(fixes, Fix{
				Change: "fewer bits: format: " + alt.Name,
				Effect: fmt.Sprintf("%g bits a weight, weights %s, total %s", alt.BitsPerWeight, gb(fit.WeightsGB), gb(fit.NeedGB)),
			})
		}
	}
	return fixes
}

// largestContext is the longest power-of-two context shorter than context
// that fits under limitGB, or 0.
func largestContext(d catalog.Device, shape catalog.ModelShape, f catalog.Format, context int, kv string, limitGB float64) (int, catalog.Fit) {
	if context <= minFixContext {
		return 0, catalog.Fit{}
	}
	for ctx := 1 << (bits.Len(uint(context-1)) - 1); ctx >= minFixContext; ctx /= 2 {
		if fit, err := fitAt(d, shape, f, ctx, kv); err == nil && fit.NeedGB <= limitGB {
			return ctx, fit
		}
	}
	return 0, catalog.Fit{}
}

func kvBytesPerToken(shape catalog.ModelShape, kv string) int64 {
	name, err := catalogKV(kv)
	if err != nil {
		return 0
	}
	n, err := catalog.KVCacheBytes(shape, 1, name)
	if err != nil {
		return 0
	}
	return n
}

// maxWeightsBeside solves weights + kv + overhead(weights) <= limit for the
// weights in GB, with the catalog's overhead model (a fixed part plus a
// fraction of the weights).
func maxWeightsBeside(limitGB, kvGB float64) float64 {
	return (limitGB - kvGB - catalog.RuntimeOverheadBaseGB) / (1 + catalog.RuntimeOverheadFraction)
}

// maxParamsBeside solves weights + kv + overhead(weights) <= limit for the
// weights, with the catalog's overhead model (a fixed part plus a fraction
// of the weights), and converts the weights to parameters in f.
func maxParamsBeside(limitGB, kvGB float64, f catalog.Format) int64 {
	weights := maxWeightsBeside(limitGB, kvGB)
	if weights <= 0 || f.BitsPerWeight <= 0 {
		return 0
	}
	return int64(weights * 1e9 * 8 / f.BitsPerWeight)
}
