package python_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// TestScoringModule runs the Python tests of ppl_scoring.py, the scorer
// every helper that reports a perplexity imports, in the llama toolchain
// (numpy and torch): the scheme against a transcription of llama.cpp's
// loop, and the built-in model's running perplexity, chunk by chunk,
// against what llama-perplexity printed for its F16 GGUF on the same text
// (pipelines/gguf/testdata/perplexity-base.log, llama.cpp 0c1e57098).
func TestScoringModule(t *testing.T) {
	if os.Getenv("EDGEPIPE_REAL") != "1" {
		t.Skip("real tier: set EDGEPIPE_REAL=1 after `edgepipe toolchain install llama` (go tool task test does both)")
	}
	cache := os.Getenv("EDGEPIPE_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(base, "edgepipe")
	}
	llama, err := toolchain.Resolve(cache, toolchain.Llama)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	model, err := toolchain.BuiltinModel(ctx, cache, "smollm2-135m")
	if err != nil {
		t.Fatal(err)
	}
	text, err := data.Materialize("eval", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logPath, err := filepath.Abs("../../pipelines/gguf/testdata/perplexity-base.log")
	if err != nil {
		t.Fatal(err)
	}
	// test_mlc_scales: the MLC converter's searched scales against mlc_llm's,
	// decoded the way the gate decodes them (numpy and torch, no model).
	cmd := exec.CommandContext(ctx, llama.Python, "-m", "unittest", "-v", "test_ppl_scoring", "test_mlc_scales")
	cmd.Env = append(os.Environ(), "PYTHONPATH=.:tests", "HF_HUB_OFFLINE=1",
		"EDGEPIPE_PPL_MODEL="+model, "EDGEPIPE_PPL_TEXT="+text, "EDGEPIPE_PPL_LOG="+logPath, "EDGEPIPE_PPL_CHUNKS=4")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the scoring module's tests failed: %v", err)
	}
}
