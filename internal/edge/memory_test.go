package edge

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

var llama3Shape = catalog.ModelShape{Layers: 32, KVHeads: 8, HeadDim: 128, Params: llama3Params}

func mustDevice(t *testing.T, id string) catalog.Device {
	t.Helper()
	d, ok := catalog.Lookup(id)
	if !ok {
		t.Fatalf("no device %s", id)
	}
	return d
}

func mustFormat(t *testing.T, name string) catalog.Format {
	t.Helper()
	f, err := catalog.ParseFormat(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func near(a, b float64) bool { return math.Abs(a-b) < 0.005 }

// The domain brief's trap: an 8 GB phone, a 4 GB model, a 32K context.
func TestLongContextTrap(t *testing.T) {
	phone := mustDevice(t, "apple-a18")
	q4 := mustFormat(t, "gguf-q4_0") // 8.03B parameters at 4.64 bits: 4.66 GB
	c, err := CheckMemory(phone, llama3Shape, q4, 32768, "f16", 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.OK() || !near(c.WeightsGB, 4.66) || !near(c.KVGB, 4.29) || !near(c.NeedGB, 9.49) || c.LimitGB != 6 || c.LimitIsBudget {
		t.Fatalf("32K: %+v", c)
	}
	want := []string{
		"context: 4096 (KV cache 0.54 GB, total 5.73 GB: the longest power-of-two context that fits)",
		"kv_dtype: q8 with context: 8192 (KV cache 0.57 GB, total 5.76 GB)",
		"kv_dtype: q4 with context: 16384 (KV cache 0.60 GB, total 5.79 GB)",
		"a smaller model (at most 2.30B parameters in gguf-q4_0, 1.34 GB of weights, fit beside this 4.29 GB KV cache; a smaller model's KV cache is usually smaller too)",
	}
	if got := fixStrings(c.Fixes); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("fixes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The same model at 4K fits.
	if c, _ := CheckMemory(phone, llama3Shape, q4, 4096, "f16", 0); !c.OK() || c.Fixes != nil {
		t.Errorf("4K: %+v", c)
	}
	// "Unless the KV cache is quantized aggressively": a 4 GB model with a
	// Q4 cache at 32K fits.
	fourGB := llama3Shape
	fourGB.Params = int64(4e9 * 8 / q4.BitsPerWeight)
	if c, _ := CheckMemory(phone, fourGB, q4, 32768, "q4", 0); !c.OK() {
		t.Errorf("4 GB model, Q4 KV at 32K: %+v", c)
	}
	if c, _ := CheckMemory(phone, fourGB, q4, 32768, "f16", 0); c.OK() {
		t.Errorf("4 GB model, f16 KV at 32K fits: %+v", c)
	}
}

// Every fix, applied, must fit: the numbers in a hint are only worth
// giving if they are true.
func TestEveryMemoryFixFits(t *testing.T) {
	for _, tc := range []struct {
		device, format string
		shape          catalog.ModelShape
		context        int
		kv             string
		budget         float64
	}{
		{"apple-a18", "gguf-q4_0", llama3Shape, 32768, "f16", 0},
		{"apple-a18", "coreml-int4", llama3Shape, 131072, "f16", 0},
		{"apple-a18", "gguf-q4_0", llama3Shape, 4096, "f16", 4}, // the brief's "under 4 GB" iOS exercise
		{"jetson-orin-nano-super", "gguf-q8_0", llama3Shape, 8192, "q8", 0},
		{"snapdragon-8-gen-3", "qnn-w8a16", llama3Shape, 16384, "f16", 0},
		{"webgpu-android", "mlc-q4f16_1", llama3Shape, 100000, "f16", 0}, // not a power of two
		{"jetson-agx-orin", "trtllm-int4", catalog.ModelShape{Layers: 80, KVHeads: 8, HeadDim: 128, Params: 70_553_706_496}, 131072, "f16", 0},
	} {
		d, f := mustDevice(t, tc.device), mustFormat(t, tc.format)
		c, err := CheckMemory(d, tc.shape, f, tc.context, tc.kv, tc.budget)
		if err != nil {
			t.Fatal(err)
		}
		if c.OK() {
			t.Errorf("%+v: fits, the case needs one that does not", tc)
			continue
		}
		if len(c.Fixes) == 0 {
			t.Errorf("%+v: no fixes", tc)
		}
		for _, fix := range c.Fixes {
			shape, format, ctx, kv := tc.shape, f, tc.context, tc.kv
			switch {
			case strings.HasPrefix(fix.Change, "context: "):
				ctx = atoi(t, strings.TrimPrefix(fix.Change, "context: "))
				if ctx >= tc.context || ctx&(ctx-1) != 0 {
					t.Errorf("%s: context %d is not a shorter power of two", fix, ctx)
				}
			case strings.HasPrefix(fix.Change, "kv_dtype: "):
				rest := strings.TrimPrefix(fix.Change, "kv_dtype: ")
				kv = rest
				if k, c, ok := strings.Cut(rest, " with context: "); ok {
					kv, ctx = k, atoi(t, c)
				}
			case strings.HasPrefix(fix.Change, "fewer bits: format: "):
				format = mustFormat(t, strings.TrimPrefix(fix.Change, "fewer bits: format: "))
				if !d.Runs(format.Name) || format.BitsPerWeight >= f.BitsPerWeight {
					t.Errorf("%s: %s cannot stand in for %s on %s", fix, format.Name, f.Name, d.ID)
				}
			case fix.Change == "a smaller model":
				shape.Params = parseParams(t, fix.Effect)
			default:
				t.Errorf("unknown fix %q", fix.Change)
				continue
			}
			got, err := CheckMemory(d, shape, format, ctx, kv, tc.budget)
			if err != nil || !got.OK() {
				t.Errorf("%+v: fix %s does not fit: %+v, %v", tc, fix, got, err)
			}
		}
	}
}

func TestMemoryBudgetIsTheTighterLimit(t *testing.T) {
	phone := mustDevice(t, "apple-a18")
	smol := catalog.ModelShape{Layers: 30, KVHeads: 3, HeadDim: 64, Params: 134515008}
	c, _ := CheckMemory(phone, smol, mustFormat(t, "coreml-int4"), 4096, "", 4)
	if !c.OK() || !c.LimitIsBudget || c.LimitGB != 4 || c.KVDtype != "f16" {
		t.Errorf("budget 4 GB: %+v", c)
	}
	// A budget above what the device leaves does not raise the limit.
	if c, _ := CheckMemory(phone, smol, mustFormat(t, "coreml-int4"), 4096, "", 100); c.LimitIsBudget || c.LimitGB != 6 {
		t.Errorf("budget 100 GB: %+v", c)
	}
	if _, err := CheckMemory(phone, smol, mustFormat(t, "coreml-int4"), 4096, "q2", 0); err == nil {
		t.Error("an unknown KV type passed")
	}
}

func fixStrings(fixes []Fix) []string {
	out := make([]string, len(fixes))
	for i, f := range fixes {
		out[i] = f.String()
	}
	return out
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// parseParams reads "at most 2.31B parameters" back into a count.
func parseParams(t *testing.T, effect string) int64 {
	t.Helper()
	f := strings.Fields(strings.TrimPrefix(effect, "at most "))[0]
	mult := map[byte]float64{'B': 1e9, 'M': 1e6, 'K': 1e3}[f[len(f)-1]]
	x, err := strconv.ParseFloat(f[:len(f)-1], 64)
	if err != nil || mult == 0 {
		t.Fatalf("cannot read a parameter count from %q", effect)
	}
	return int64(x * mult)
}
