package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// gemmaRecipe is recipes/gemma.yaml's families at test size: the same
// formats and methods, two 128-token chunks of evaluation, a smaller
// calibration for the llmcompressor targets and 16 decoded tokens a
// prompt for the decode checks (the window prompt still ends short of the
// window, so its decode crosses it), so the second built-in model fits
// CI's time (context 1024 still reaches past Gemma 3's 512-token window).
// The recipe itself keeps its full evaluation, calibration and 64 tokens.
const gemmaRecipe = `edgepipe: 1
name: gemma-test
model: {source: builtin:gemma3-270m}
data: {calibration: builtin:calibration, eval: builtin:eval}
quality: {perplexity: {context: 128, max_chunks: 2, warn_delta: 0.5, max_delta: 2.0}, generation: {max_new_tokens: 16}}
targets:
  laptop-gguf-q4km: {device: x86-laptop, format: gguf-q4_k_m}
  laptop-onnx-int4: {device: x86-laptop, format: onnx-int4}
  iphone-coreml-int4: {device: apple-a18, format: coreml-int4, context: 1024}
  a100-gptq: {device: nvidia-a100, format: gptq-w4a16, with: {group_size: 32, num_calibration_samples: 4, max_seq_length: 128}}
  h100-awq: {device: nvidia-h100, format: awq-w4a16, with: {group_size: 32, num_calibration_samples: 4, max_seq_length: 64, n_grid: 3}}
`

// TestRealGemma runs every family that runs here on the second built-in
// model, Gemma 3 270M (another architecture, a SentencePiece vocabulary of
// 262,144 tokens, sliding-window attention, a GGUF of mixed types). Every
// target must be converted and scored against the unconverted model on
// the same tokens; the default gate then publishes it or fails it (exit 3)
// on its measured delta, which the test logs: Core ML's affine INT4, for
// one, loses more on Gemma's K-quant weights than on SmolLM2's Q4_1 ones
// (docs/results/gemma3.md). A published folder must verify, say the source was a Q4_K_M
// GGUF, and (Core ML) carry the sliding-window mask input.
func TestRealGemma(t *testing.T) {
	t.Parallel() // two real tests at a time share the cores (docs/testing.md)
	run, work := realEdgepipe(t, "edgepipe toolchain install llama llamacpp onnx coreml llmcompressor builtin:gemma3-270m")
	if err := os.WriteFile(filepath.Join(work, "gemma.yaml"), []byte(gemmaRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir(t), "edgepipe"), "run", "-j", "2", "--keep-going", "gemma.yaml")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "EDGEPIPE_TOOL_PATH=")
	if c := os.Getenv("EDGEPIPE_CACHE"); c != "" {
		cmd.Env = append(cmd.Env, "EDGEPIPE_CACHE="+c)
	}
	b, err := cmd.CombinedOutput()
	out := string(b)
	t.Log(out)
	// 0: every target passed; 3: a gate failed a target on its number.
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 3) {
		t.Fatalf("edgepipe run: %v", err)
	}
	gate := regexp.MustCompile(`gate +(\S+): perplexity ([0-9.]+) vs baseline ([0-9.]+): delta (\S+)(?: \[[^\]]*\])? -> (\w+)`)
	verdicts := map[string]string{}
	for _, m := range gate.FindAllStringSubmatch(out, -1) {
		conv, _ := strconv.ParseFloat(m[2], 64)
		base, _ := strconv.ParseFloat(m[3], 64)
		plausiblePPL(t, m[1], conv, base)
		verdicts[m[1]] = m[5]
		t.Logf("%s: perplexity %s vs baseline %s, delta %s -> %s", m[1], m[2], m[3], m[4], m[5])
	}
	for _, target := range []string{"laptop-gguf-q4km", "laptop-onnx-int4", "iphone-coreml-int4", "a100-gptq", "h100-awq"} {
		v, scored := verdicts[target]
		if !scored {
			t.Errorf("%s: never scored: the family did not run on Gemma 3", target)
			continue
		}
		art := filepath.Join(work, "artifacts", "gemma-test", target)
		if v == manifest.VerdictFail {
			if _, err := os.Stat(art); err == nil {
				t.Errorf("%s failed its gate but %s exists", target, art)
			}
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
		if p := m.Metrics.Perplexity; p == nil || p.Verdict != v || p.Chunks != 2 {
			t.Errorf("%s: perplexity record %+v", target, p)
		}
		for _, s := range m.Steps {
			if s.StandIn {
				t.Errorf("%s: step %s ran a stand-in", target, s.ID)
			}
			if strings.HasPrefix(s.ID, "coreml-convert") && !strings.Contains(s.Note, "sliding_mask") {
				t.Errorf("%s: %s note %q does not say the package takes a sliding_mask (Gemma 3's window is 512, the context 1024)", target, s.ID, s.Note)
			}
		}
	}
}
