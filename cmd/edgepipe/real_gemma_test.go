package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// gemmaRecipe is recipes/gemma.yaml's families at test size: the same
// formats and methods, two 256-token chunks of evaluation and a smaller
// calibration for the llmcompressor targets, so the second built-in model
// fits CI's time. The recipe itself keeps its full evaluation.
const gemmaRecipe = `edgepipe: 1
name: gemma-test
model: {source: builtin:gemma3-270m}
data: {calibration: builtin:calibration, eval: builtin:eval}
quality: {perplexity: {context: 256, max_chunks: 2, warn_delta: 0.5, max_delta: 2.0}}
targets:
  laptop-gguf-q4km: {device: x86-laptop, format: gguf-q4_k_m}
  laptop-onnx-int4: {device: x86-laptop, format: onnx-int4}
  iphone-coreml-int4: {device: apple-a18, format: coreml-int4, context: 4096}
  a100-gptq: {device: nvidia-a100, format: gptq-w4a16, with: {group_size: 32, num_calibration_samples: 8, max_seq_length: 256}}
  h100-awq: {device: nvidia-h100, format: awq-w4a16, with: {group_size: 32, num_calibration_samples: 8, max_seq_length: 128, n_grid: 4}}
`

// TestRealGemma runs every family that runs here on the second built-in
// model, Gemma 3 270M (another architecture, a SentencePiece vocabulary of
// 262,144 tokens, sliding-window attention, a GGUF of mixed types): each
// target must pass the default gate and publish, each manifest must say the
// source was a Q4_K_M GGUF, and the Core ML package must carry the
// sliding-window mask input.
func TestRealGemma(t *testing.T) {
	run, work := realEdgepipe(t, "edgepipe toolchain install llama llamacpp onnx coreml llmcompressor builtin:gemma3-270m")
	if err := os.WriteFile(filepath.Join(work, "gemma.yaml"), []byte(gemmaRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	out := string(run("run", "-j", "2", "gemma.yaml"))
	t.Log(out)
	gate := regexp.MustCompile(`gate +(\S+): perplexity ([0-9.]+) vs baseline ([0-9.]+): delta \S+ -> (\w+)`)
	for _, m := range gate.FindAllStringSubmatch(out, -1) {
		conv, _ := strconv.ParseFloat(m[2], 64)
		base, _ := strconv.ParseFloat(m[3], 64)
		plausiblePPL(t, m[1], conv, base)
	}
	for _, target := range []string{"laptop-gguf-q4km", "laptop-onnx-int4", "iphone-coreml-int4", "a100-gptq", "h100-awq"} {
		art := filepath.Join(work, "artifacts", "gemma-test", target)
		if _, err := os.Stat(filepath.Join(art, "manifest.json")); err != nil {
			t.Errorf("%s: not published: %v", target, err)
			continue
		}
		run("verify", art)
		m, err := manifest.Read(art)
		if err != nil {
			t.Fatal(err)
		}
		if q := m.Source.Quantized; q == nil || q.Format != "gguf" || q.Type != "Q4_K_M" || !strings.Contains(q.TensorTypes, "Q8_0:") {
			t.Errorf("%s: source.quantized %+v, want the Q4_K_M GGUF with its tensor types", target, q)
		}
		p := m.Metrics.Perplexity
		if p == nil || p.Verdict == manifest.VerdictFail || p.Chunks != 2 {
			t.Errorf("%s: perplexity record %+v", target, p)
			continue
		}
		t.Logf("%s: perplexity %.4f vs baseline %.4f (delta %+.4f, %s)", target, p.Converted, p.Baseline, p.Delta, p.Verdict)
		for _, s := range m.Steps {
			if s.StandIn {
				t.Errorf("%s: step %s ran a stand-in", target, s.ID)
			}
			if strings.HasPrefix(s.ID, "coreml-convert") && !strings.Contains(s.Note, "sliding_mask") {
				t.Errorf("%s: %s note %q does not say the package takes a sliding_mask (Gemma 3's window is 512, the context 4096)", target, s.ID, s.Note)
			}
		}
	}
}
