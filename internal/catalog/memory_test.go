package catalog_test

import (
	"math"
	"strings"
	"testing"

	. "github.com/edgepipe/edgepipe/internal/catalog"
	_ "github.com/edgepipe/edgepipe/pipelines"
)

var (
	llama3_8B  = ModelShape{Layers: 32, KVHeads: 8, HeadDim: 128, Params: 8030261248}
	llama32_3B = ModelShape{Layers: 28, KVHeads: 8, HeadDim: 128, Params: 3212749824}
	smolLM2    = ModelShape{Layers: 30, KVHeads: 3, HeadDim: 64, Params: 134515008}
)

func TestKVCacheBytes(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name    string
		shape   ModelShape
		context int
		dtype   string
		want    int64
	}{
		{"llama3-8b 32K f16: about 4 GB", llama3_8B, 32768, "f16", 4 * gib},
		{"llama3-8b 4K f16", llama3_8B, 4096, "f16", gib / 2},
		{"llama3-8b 8K f16", llama3_8B, 8192, "f16", gib},
		{"llama3-8b 32K fp8: the brief's 2 GB", llama3_8B, 32768, "fp8", 2 * gib},
		{"llama3-8b 32K q8_0: 34 bytes per 32", llama3_8B, 32768, "q8_0", 2 * gib * 34 / 32},
		{"llama3-8b 32K q4_0: 18 bytes per 32", llama3_8B, 32768, "q4_0", 2 * gib * 18 / 32},
		{"16 layers 32K f16: the brief's 2 GB", ModelShape{Layers: 16, KVHeads: 8, HeadDim: 128}, 32768, "f16", 2 * gib},
		{"llama3-8b 32K f32", llama3_8B, 32768, "f32", 8 * gib},
		// 3 x 64 = 192 values a row: 6 blocks of q8_0 = 204 bytes.
		{"smollm2 512 q8_0", smolLM2, 512, "q8_0", 30 * 2 * 512 * 204},
		{"smollm2 512 f16", smolLM2, 512, "f16", 30 * 2 * 512 * 384},
		// 1 x 40 = 40 values: a partial block still costs a whole block.
		{"partial block", ModelShape{Layers: 1, KVHeads: 1, HeadDim: 40}, 1, "q4_0", 2 * 2 * 18},
	} {
		got, err := KVCacheBytes(tc.shape, tc.context, tc.dtype)
		if err != nil || got != tc.want {
			t.Errorf("%s: KVCacheBytes = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
}

func TestKVCacheBytesErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		shape   ModelShape
		context int
		dtype   string
		want    string
	}{
		{"unknown type", llama3_8B, 4096, "q4_o", `unknown KV cache type "q4_o"; did you mean "q4_0"?`},
		{"no layers", ModelShape{KVHeads: 8, HeadDim: 128}, 4096, "f16", "must all be positive"},
		{"no context", llama3_8B, 0, "f16", "must be a positive number of tokens"},
		{"overflow", ModelShape{Layers: 1 << 20, KVHeads: 1 << 20, HeadDim: 1 << 20}, 1 << 30, "f32", "overflows"},
	} {
		_, err := KVCacheBytes(tc.shape, tc.context, tc.dtype)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The domain brief: "On an 8 GB phone, a 4 GB model plus 2 GB of KV cache
// for 32K tokens plus the OS runs out of memory. Keep edge context at 4K-8K
// unless the KV cache is quantized aggressively (Q4 KV)."
func TestMemoryFitLongContextTrap(t *testing.T) {
	phone, _ := Lookup("apple-a18")
	if phone.MemoryGB != 8 {
		t.Fatalf("apple-a18 has %v GB, the example needs an 8 GB phone", phone.MemoryGB)
	}
	for _, tc := range []struct {
		context int
		kv      string
		fits    bool
	}{
		{4096, "f16", true},
		{8192, "f16", true},
		{32768, "f16", false}, // 4 GB of KV on top of 4 GB of weights
		{32768, "q8_0", false},
		{32768, "fp8", false}, // the brief's 2 GB of KV cache
		{32768, "q4_0", true}, // "unless the KV cache is quantized aggressively"
	} {
		kv, err := KVCacheBytes(llama3_8B, tc.context, tc.kv)
		if err != nil {
			t.Fatal(err)
		}
		fit := MemoryFit(phone, 4, kv)
		if fit.Fits != tc.fits {
			t.Errorf("4 GB model, %d tokens of %s KV on %s: %+v, want fits=%v", tc.context, tc.kv, phone.ID, fit, tc.fits)
		}
	}
}

func TestMemoryFitArithmetic(t *testing.T) {
	phone, _ := Lookup("apple-a18")
	fit := MemoryFit(phone, 4, 1<<29) // 4K of Llama-3-8B KV in f16
	want := Fit{WeightsGB: 4, KVGB: 0.536870912, OverheadGB: 0.5, NeedGB: 5.036870912, AvailableGB: 6, Fits: true}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"weights", fit.WeightsGB, want.WeightsGB},
		{"kv", fit.KVGB, want.KVGB},
		{"overhead", fit.OverheadGB, want.OverheadGB},
		{"need", fit.NeedGB, want.NeedGB},
		{"available", fit.AvailableGB, want.AvailableGB},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if !fit.Fits {
		t.Error("does not fit")
	}
}

// The brief: the Jetson Orin Nano Super (8 GB) fits 3B-class models.
func TestMemoryFitJetsonNano(t *testing.T) {
	nano, _ := Lookup("jetson-orin-nano-super")
	q4, _ := ParseFormat("gguf-q4_k_m")
	f16, _ := ParseFormat("gguf-f16")
	kv, _ := KVCacheBytes(llama32_3B, 4096, "f16")
	if fit := MemoryFit(nano, EstimateWeightsGB(llama32_3B.Params, q4), kv); !fit.Fits {
		t.Errorf("3B Q4_K_M at 4K does not fit the Orin Nano Super: %+v", fit)
	}
	if fit := MemoryFit(nano, EstimateWeightsGB(llama32_3B.Params, f16), kv); fit.Fits {
		t.Errorf("3B F16 fits the Orin Nano Super: %+v", fit)
	}
}
