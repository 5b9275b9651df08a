package gguf_test

import (
	"context"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	_ "github.com/edgepipe/edgepipe/pipelines/shared" // the helpers the built-in model is made with
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestRealGGUFPath (here, where the real helper scripts are linked, not in
// internal/toolchain, whose tests register stand-ins for them) installs
// the real toolchains (about 2.8 GB of wheels and a
// llama.cpp build: allow an hour cold on two cores), provisions the
// built-in model and runs the converter, llama-quantize and
// llama-perplexity on it. Opt in with EDGEPIPE_REAL=1; the toolchains go to
// EDGEPIPE_CACHE (default: the user cache folder) so later runs reuse them.
func TestRealGGUFPath(t *testing.T) {
	if os.Getenv("EDGEPIPE_REAL") != "1" {
		t.Skip("real tier: set EDGEPIPE_REAL=1 (installs torch and builds llama.cpp)")
	}
	cache := os.Getenv("EDGEPIPE_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(base, "edgepipe")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Minute)
	defer cancel()

	lc, err := toolchain.Install(ctx, cache, toolchain.LlamaCpp, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if lc.Python == "" || lc.Versions["build"] == "" {
		t.Fatalf("llamacpp resolved without the llama Python or a build version: %+v", lc)
	}
	hf, err := toolchain.BuiltinModel(ctx, cache, "builtin:smollm2-135m")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(hf, f)); err != nil {
			t.Fatalf("checkpoint lacks %s: %v", f, err)
		}
	}

	work := t.TempDir()
	f16 := filepath.Join(work, "f16.gguf")
	convert, _, err := lc.Tool(toolchain.ToolConvertHF)
	if err != nil {
		t.Fatal(err)
	}
	run(t, ctx, append(convert, hf, "--outtype", "f16", "--outfile", f16)...)
	q := filepath.Join(work, "q4_k_m.gguf")
	out := run(t, ctx, lc.Tools[toolchain.ToolQuantize], f16, q, "Q4_K_M")
	// SmolLM2's rows are 576 wide: K-quants (blocks of 256) must fall back.
	if !regexp.MustCompile(`(?m)not divisible by 256 .*-> falling back to`).MatchString(out) {
		t.Errorf("llama-quantize reported no fallback for 576-wide tensors:\n%s", tail(out))
	}
	eval, err := filepath.Abs("../../data/eval.txt")
	if err != nil {
		t.Fatal(err)
	}
	var ppl [2]float64
	for i, m := range []string{f16, q} {
		out := run(t, ctx, lc.Tools[toolchain.ToolPerplexity], "-m", m, "-f", eval, "-c", "512", "-b", "512", "--chunks", "4")
		mm := regexp.MustCompile(`Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)`).FindStringSubmatch(out)
		if mm == nil {
			t.Fatalf("no final estimate from llama-perplexity:\n%s", tail(out))
		}
		ppl[i], _ = strconv.ParseFloat(mm[1], 64)
	}
	// A trained model on English prose: far below the 49152 of a uniform
	// guess, and the 4-bit model no better than f16 by more than noise.
	if ppl[0] < 5 || ppl[0] > 100 || ppl[1] < ppl[0]*0.98 {
		t.Errorf("perplexity f16 %.3f, Q4_K_M %.3f", ppl[0], ppl[1])
	}
	t.Logf("perplexity over 4 chunks: f16 %.4f, Q4_K_M %.4f", ppl[0], ppl[1])
}

func run(t *testing.T, ctx context.Context, argv ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, tail(string(out)))
	}
	return string(out)
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}
