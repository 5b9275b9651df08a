package python_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	_ "github.com/edgepipe/edgepipe/pipelines" // the families' toolchains (vision)
)

// TestScoringModule runs the Python tests of ppl_scoring.py, the scorer
// every helper that reports a perplexity imports, in the llama toolchain
// (numpy and torch): the scheme against a transcription of llama.cpp's
// loop, and the built-in model's running perplexity, chunk by chunk,
// against what llama-perplexity printed for its F16 GGUF on the same text
// (pipelines/gguf/testdata/perplexity-base.log, llama.cpp 0c1e57098).
func TestScoringModule(t *testing.T) {
	cache, llama := realToolchain(t, toolchain.Llama)
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

// TestVisionDataModule runs the Python tests of vision_data.py, what every
// vision helper reads image sets and models with, in the vision
// toolchain: the index splits, the refusal of malformed sets, the
// preprocessing, the built-in data/digits-*.npz rebuilt byte for byte
// from scikit-learn and data/skimage-photos*.npz from scikit-image's
// photos, and vision_import.py's strict renaming.
func TestVisionDataModule(t *testing.T) {
	_, vision := realToolchain(t, toolchain.Vision)
	dataDir, err := filepath.Abs("../../data")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, vision.Python, "-m", "unittest", "-v", "test_vision_data")
	cmd.Env = append(os.Environ(), "PYTHONPATH=.:tests", "EDGEPIPE_VISION_DATA="+dataDir, "OMP_NUM_THREADS=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("vision_data.py's tests failed: %v", err)
	}
	if !strings.Contains(string(out), "test_builtin_sets_rebuild_byte_identical") || !strings.Contains(string(out), "test_photo_sets_rebuild_byte_identical") ||
		strings.Contains(string(out), "skipped") {
		t.Fatalf("the built-in image sets were not checked:\n%s", out)
	}
}

// TestOnnxRuntimeThreads runs edgepipe_threads.py's tests in the vision
// toolchain's ONNX Runtime: sessions that a library makes for itself (the
// QDQ quantizer's calibrator) get the step's thread grant.
func TestOnnxRuntimeThreads(t *testing.T) {
	_, vision := realToolchain(t, toolchain.Vision)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, vision.Python, "-m", "unittest", "-v", "test_edgepipe_threads")
	cmd.Env = append(os.Environ(), "PYTHONPATH=.:tests")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("edgepipe_threads.py's tests failed: %v", err)
	}
}

// realToolchain skips outside the real tier, else resolves the installed
// toolchain name in the edgepipe cache (EDGEPIPE_CACHE, default the user
// cache folder) and returns the cache with it.
func realToolchain(t *testing.T, name string) (string, *toolchain.Installed) {
	t.Helper()
	if os.Getenv("EDGEPIPE_REAL") != "1" {
		t.Skipf("real tier: set EDGEPIPE_REAL=1 after `edgepipe toolchain install %s` (go tool task test does both)", name)
	}
	cache, err := cache.Root(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := toolchain.Resolve(cache, name)
	if err != nil {
		t.Fatal(err)
	}
	return cache, tc
}
