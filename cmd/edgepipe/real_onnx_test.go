package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// TestRealONNXAndQNN runs recipes/onnx.yaml on the built-in model with the
// real onnx and llama toolchains: optimum-onnx export, MatMulNBits int4,
// ONNX Runtime validation and the transformers baseline; then verifies
// every artifact and reads the measured numbers from the manifests. The
// QNN targets (recipes/android.yaml: QNN's HTP backend and its simulator,
// minutes per chunk) run smaller in TestRealQNNHTP. Opt in with EDGEPIPE_REAL=1; the
// toolchains go to EDGEPIPE_CACHE (default: the user cache folder), so
// later runs reuse them.
func TestRealONNXAndQNN(t *testing.T) {
	t.Parallel() // two real tests at a time share the cores (docs/testing.md)
	run, work := realEdgepipe(t, "installs torch, optimum-onnx and ONNX Runtime")
	run("toolchain", "install", "llama", "onnx", "builtin:smollm2-135m")

	type want struct {
		recipe, target, format string
	}
	for _, w := range []want{
		{"onnx.yaml", "laptop-onnx-fp32", "onnx-fp32"},
		{"onnx.yaml", "laptop-onnx-int4", "onnx-int4"},
	} {
		recipe, err := filepath.Abs(filepath.Join("..", "..", "recipes", w.recipe))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(work, "artifacts", w.recipe)
		run("run", "--out", out, recipe)
		dir := filepath.Join(out, w.target)
		run("verify", dir)

		var m struct {
			Target struct {
				Format string `json:"format"`
			} `json:"target"`
			Steps []struct {
				Kind    string `json:"kind"`
				StandIn bool   `json:"stand_in"`
			} `json:"steps"`
			Metrics struct {
				Perplexity *struct {
					Baseline  float64 `json:"baseline"`
					Converted float64 `json:"converted"`
					Verdict   string  `json:"verdict"`
				} `json:"perplexity"`
				Generation *manifest.Generation `json:"generation"`
				Checks     []struct {
					Name   string `json:"name"`
					Passed bool   `json:"passed"`
					Detail string `json:"detail"`
				} `json:"checks"`
			} `json:"metrics"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m.Target.Format != w.format {
			t.Errorf("%s: format %q, want %q", w.target, m.Target.Format, w.format)
		}
		for _, s := range m.Steps {
			if s.StandIn {
				t.Errorf("%s: step kind %s ran a stand-in in the real tier", w.target, s.Kind)
			}
		}
		p := m.Metrics.Perplexity
		if p == nil || !(p.Baseline > 1) || !(p.Converted > 1) || p.Verdict == "" || p.Verdict == "fail" {
			t.Errorf("%s: perplexity gate %+v: want measured numbers and a passing verdict", w.target, p)
		}
		logits, decode := false, false
		for _, c := range m.Metrics.Checks {
			if c.Passed && strings.Contains(c.Name, "logits-vs-pytorch") {
				logits = true
			}
			if strings.Contains(c.Name, "decode consistency") {
				decode = c.Passed
			}
			if strings.Contains(c.Name, "decode") || strings.Contains(c.Name, "generation") {
				t.Logf("%s: %s (passed: %v): %s", w.target, c.Name, c.Passed, c.Detail)
			}
		}
		if g := m.Metrics.Generation; g == nil || !decode || !strings.Contains(g.Runtime, "ONNX Runtime") {
			t.Errorf("%s: generation %+v: want a passing decode consistency check on ONNX Runtime", w.target, g)
		}
		if !logits {
			t.Errorf("%s: no passed logits-vs-pytorch check in the manifest: %+v", w.target, m.Metrics.Checks)
		}
		t.Logf("%s: ppl %.4f vs baseline %.4f (%s)", w.target, p.Converted, p.Baseline, p.Verdict)
	}
}
