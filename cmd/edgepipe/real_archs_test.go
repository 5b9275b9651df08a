package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// TestRealTinyArchitectures is the real tier's slice of the architecture
// matrix (`go tool task bench -- archs` runs all of it): Qwen3, whose q/k
// norms other architectures lack, through llama.cpp's Q8_0 and the ONNX
// export, with the real tools. A random model's perplexity says nothing,
// so the recipe opens the perplexity gate and the test gates on parity
// with the unconverted model instead: the fp32 export must match it to
// rounding, the 8-bit GGUF closely; a format that refuses Qwen3 would be
// exit 2 at validate (MLC does, and is refused here too).
func TestRealTinyArchitectures(t *testing.T) {
	t.Parallel() // two real tests at a time share the cores (docs/testing.md)
	run, work := realEdgepipe(t, "edgepipe toolchain install llama llamacpp onnx builtin:tiny-qwen3")
	recipe := `edgepipe: 1
name: tiny-qwen3
model: {source: builtin:tiny-qwen3}
data: {eval: builtin:eval}
quality:
  perplexity: {context: 128, max_chunks: 4, warn_delta: 1000000, max_delta: 1000000}
  generation: {max_new_tokens: 8, min_token_agreement: 0, max_mean_kl: 1000000}
targets:
  q8: {device: x86-laptop, format: gguf-q8_0}
  fp32: {device: x86-laptop, format: onnx-fp32}
`
	if err := os.WriteFile(filepath.Join(work, "tiny.yaml"), []byte(recipe), 0o644); err != nil {
		t.Fatal(err)
	}
	web := strings.Replace(recipe, "q8: {device: x86-laptop, format: gguf-q8_0}", "web: {device: webgpu-m3-max, format: mlc-q4f16_1}", 1)
	if err := os.WriteFile(filepath.Join(work, "web.yaml"), []byte(web), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := realCommand(t, work, "validate", "web.yaml").CombinedOutput(); err == nil || !strings.Contains(string(out), "mlc-q4f16_1 cannot take a qwen3 model") {
		t.Errorf("validate of an MLC target for Qwen3: %v\n%s", err, out)
	}

	t.Log(string(run("run", "tiny.yaml")))
	for target, bound := range map[string]struct{ kl, top1 float64 }{
		"fp32": {1e-6, 0.999}, // the same float32 graph: only summation order differs
		"q8":   {0.05, 0.8},   // measured on tiny-qwen2: KL 0.003, top-1 0.95
	} {
		dir := filepath.Join(work, "artifacts", "tiny-qwen3", target)
		run("verify", dir)
		m, err := manifest.Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		kl, top1 := m.Metrics.KLDivergence, m.Metrics.Top1Agreement
		if kl == nil || top1 == nil || *kl > bound.kl || *top1 < bound.top1 {
			t.Errorf("%s: KL %v, top-1 %v against the unconverted model; want KL <= %g, top-1 >= %g", target, deref(kl), deref(top1), bound.kl, bound.top1)
		}
		for _, c := range m.Metrics.Checks {
			if !c.Passed {
				t.Errorf("%s: check %s failed: %s", target, c.Name, c.Detail)
			}
		}
		for _, s := range m.Steps {
			if s.StandIn {
				t.Errorf("%s: step %s ran a stand-in", target, s.ID)
			}
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return "none"
	}
	return *p
}
