package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realQNNRecipe is recipes/android.yaml's W8A16 target at a size the real
// tier affords: QNN's HTP simulator takes minutes per chunk of 128 tokens
// on two loaded cores, so the gate here is 2 chunks of 64 tokens. (W4A16
// fails the default gate: recipes/android-w4a16.yaml and
// docs/results/qnn-htp.md.)
const realQNNRecipe = `edgepipe: 1
name: qnn-htp-real
model:
  source: builtin:smollm2-135m
data:
  calibration: builtin:calibration
  eval: builtin:eval
quality:
  perplexity:
    context: 64
    max_chunks: 2
    warn_delta: 0.5
    max_delta: 2.0
targets:
  phone-w8:
    device: snapdragon-8-gen-3
    format: qnn-w8a16
`

// TestRealQNNHTP builds the built-in model's QNN W8A16 target with the
// default backend, qnn-htp: the QDQ flow, then Qualcomm's QNN HTP
// backend (onnxruntime-qnn) compiles an EPContext model and context binary
// for the Snapdragon 8 Gen 3 and gates it on the HTP simulator with CPU
// fallback disabled. It checks the manifest names the backend, QNN's
// version, the SoC and where the gate ran, and that nothing was a stand-in.
// Opt in with EDGEPIPE_REAL=1.
func TestRealQNNHTP(t *testing.T) {
	t.Parallel() // two real tests at a time share the cores (docs/testing.md)
	run, work := realEdgepipe(t, "installs torch, ONNX Runtime and onnxruntime-qnn (QNN's HTP backend)")
	run("toolchain", "install", "llama", "onnx", "qnn", "builtin:smollm2-135m")
	recipe := filepath.Join(work, "qnn.yaml")
	if err := os.WriteFile(recipe, []byte(realQNNRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(work, "artifacts")
	run("run", "--out", out, recipe)
	for _, target := range []string{"phone-w8"} {
		dir := filepath.Join(out, target)
		run("verify", dir)
		for _, f := range []string{"model_ctx.onnx", "model_ctx_qnn.bin", "tokenizer.json"} {
			if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
				t.Errorf("%s: %s missing or empty", target, f)
			}
		}
		b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Steps []struct {
				Kind    string `json:"kind"`
				StandIn bool   `json:"stand_in"`
				Note    string `json:"note"`
			} `json:"steps"`
			Metrics struct {
				Perplexity *struct {
					Baseline  float64 `json:"baseline"`
					Converted float64 `json:"converted"`
					Verdict   string  `json:"verdict"`
					Chunks    int     `json:"chunks"`
					Backend   string  `json:"backend"`
				} `json:"perplexity"`
				Checks []struct {
					Name   string `json:"name"`
					Passed bool   `json:"passed"`
					Detail string `json:"detail"`
				} `json:"checks"`
			} `json:"metrics"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		htp := false
		for _, s := range m.Steps {
			if s.StandIn {
				t.Errorf("%s: step kind %s ran a stand-in in the real tier", target, s.Kind)
			}
			if s.Kind == "qnn-htp" {
				htp = true
				for _, want := range []string{"QNN 2.51.0 HTP backend", "soc_model 57, htp_arch v75", "on the HTP simulator"} {
					if !strings.Contains(s.Note, want) {
						t.Errorf("%s: the qnn-htp step's note does not say %q: %s", target, want, s.Note)
					}
				}
			}
		}
		if !htp {
			t.Errorf("%s: no qnn-htp step in the manifest", target)
		}
		p := m.Metrics.Perplexity
		if p == nil || !(p.Baseline > 1) || !(p.Converted > 1) || p.Chunks != 2 || !strings.Contains(p.Backend, "HTP simulator") {
			t.Fatalf("%s: perplexity %+v: want measured numbers over 2 chunks from the HTP simulator", target, p)
		}
		for _, c := range m.Metrics.Checks {
			if !c.Passed {
				t.Errorf("%s: check %s failed: %s", target, c.Name, c.Detail)
			}
			t.Logf("%s: %s: %s", target, c.Name, c.Detail)
		}
		t.Logf("%s: ppl %.4f vs baseline %.4f (%s)", target, p.Converted, p.Baseline, p.Verdict)
	}
}
