package pipelines_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/rayexec"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// pythonModule is one Python test module and what it runs in.
type pythonModule struct {
	// toolchain runs the module; "" is the host's python3, for modules
	// that need nothing beyond the standard library (the fast tier runs
	// those too).
	toolchain string
	// env adds what the module reads (a model, a text, the data folder).
	env     func(t *testing.T, ctx context.Context, cacheDir string) []string
	timeout time.Duration
}

// pythonModules are every Python test module of the tree, by file name.
// TestPythonModulesListed fails when a module is not here, so none runs
// only by hand.
var pythonModules = map[string]pythonModule{
	// The scheme against a transcription of llama.cpp's loop, and the
	// built-in model's running perplexity, chunk by chunk, against what
	// llama-perplexity printed for its F16 GGUF on the same text
	// (pipelines/gguf/testdata/perplexity-base.log).
	"test_ppl_scoring.py": {toolchain: toolchain.Llama, env: scoringEnv, timeout: 20 * time.Minute},
	// contract.py on artifacts made of the built-in model's checkpoint
	// and its source GGUF: unchanged ones pass, each deliberately broken
	// one (a wrong EOS id, a merge rule dropped, the chat template
	// removed, no tokenizer, a GGUF's EOS rewritten) fails its own check.
	"test_contract.py": {toolchain: toolchain.Llama, env: contractEnv, timeout: 10 * time.Minute},
	// decode_check.py and generate_reference.py: a KV cache fed at an
	// offset of one (positions shifted, a past entry dropped) fails the
	// families' decode bound by orders of magnitude while the right decode
	// stays inside it, on tiny random models (one decoded across its
	// sliding window) and the built-in SmolLM2 end to end.
	"test_decode_check.py": {toolchain: toolchain.Llama, env: decodeEnv, timeout: 20 * time.Minute},
	// tiny_model.py: each built-in tiny model built twice to the pinned
	// bytes, loaded, not degenerate, and with its architecture's features.
	"test_tiny_model.py": {toolchain: toolchain.Llama, env: tinyEnv, timeout: 20 * time.Minute},
	// The architecture lists plan refuses sources and formats by, against
	// the pinned registries they were taken from (transformers' causal-LM
	// and GGUF-loader tables, optimum-onnx's and optimum-intel's exporters).
	"test_architectures.py":          {toolchain: toolchain.Llama, timeout: 5 * time.Minute},
	"test_onnx_architectures.py":     {toolchain: "onnx", timeout: 5 * time.Minute},
	"test_openvino_architectures.py": {toolchain: "openvino", timeout: 5 * time.Minute},
	// The MLC converter's searched scales against mlc_llm's, decoded the
	// way the gate decodes them (numpy and torch, no model).
	"test_mlc_scales.py": {toolchain: toolchain.Llama, timeout: 10 * time.Minute},
	// vision_data.py: the index splits, the refusal of malformed sets, the
	// preprocessing, the built-in image sets rebuilt byte for byte, and
	// vision_import.py's strict renaming.
	"test_vision_data.py": {toolchain: toolchain.Vision, env: visionDataEnv, timeout: 10 * time.Minute},
	// Sessions that a library makes for itself (the QDQ quantizer's
	// calibrator) get the step's thread grant.
	"test_edgepipe_threads.py": {toolchain: toolchain.Vision, timeout: 5 * time.Minute},
	// edgepipe_tokenizer.py: tokenizer.json's own pipeline survives
	// transformers 5, and AutoTokenizer there still drops it (why it exists).
	"test_edgepipe_tokenizer.py": {toolchain: "llmcompressor", timeout: 5 * time.Minute},
	// Each helper's report() against its golden (the standard library
	// only: the fast tier runs it).
	"test_reports.py": {timeout: time.Minute},
	// emit's line: one JSON object, non-finite numbers as null.
	"test_edgepipe_report.py": {timeout: time.Minute},
	// litert_convert.py and litert_validate.py on a random classifier.
	"test_litert.py": {toolchain: "litert", timeout: 20 * time.Minute},
	// onnx_decode.py's runtime on a tiny random Llama exported with its
	// past key/values, fp32 and MatMulNBits: its decode within the
	// family's bounds, a past fed at an offset of one far outside them.
	"test_onnx_decode.py": {toolchain: "onnx", timeout: 15 * time.Minute},
	// openvino_decode.py's runtime on a tiny random Llama's stateful IR,
	// NNCF INT4 and INT8: the same, through the KV cache in its state.
	"test_openvino_decode.py": {toolchain: "openvino", timeout: 15 * time.Minute},
	// vision_qnn.py through QNN's HTP backend and its simulator.
	"test_vision_qnn.py": {toolchain: "qnn", timeout: 10 * time.Minute},
}

// pythonTestModules finds every tests/test_*.py under the repository.
func pythonTestModules(t *testing.T) map[string]string {
	t.Helper()
	found := map[string]string{}
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "artifacts") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), "test_") && strings.HasSuffix(d.Name(), ".py") && filepath.Base(filepath.Dir(p)) == "tests" {
			if prev, dup := found[d.Name()]; dup {
				t.Errorf("two Python test modules named %s (%s, %s): unittest runs them by name", d.Name(), prev, p)
			}
			found[d.Name()] = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func TestPythonModulesListed(t *testing.T) {
	found := pythonTestModules(t)
	if len(found) < len(pythonModules) {
		t.Errorf("found %d Python test modules, fewer than the %d listed: the walk looks in the wrong place", len(found), len(pythonModules))
	}
	for name, p := range found {
		if _, ok := pythonModules[name]; !ok {
			t.Errorf("%s is not in pythonModules (pipelines/python_test.go): say which toolchain runs it, or it runs only by hand", p)
		}
	}
	for name := range pythonModules {
		if _, ok := found[name]; !ok {
			t.Errorf("pythonModules lists %s, which is not in the tree", name)
		}
	}
}

// TestHelpersCompile byte-compiles every registered helper script and every
// Python test module with the host's python3: a syntax error fails the
// fast tier, not a conversion an hour into the real one.
func TestHelpersCompile(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH (the README's prerequisites have Python 3.11)")
	}
	dir, err := toolchain.MaterializeHelpers(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	files := []string{}
	for _, n := range toolchain.HelperNames() {
		files = append(files, filepath.Join(dir, n))
	}
	for _, p := range pythonTestModules(t) {
		files = append(files, p)
	}
	sort.Strings(files)
	if len(files) < 40 {
		t.Fatalf("only %d Python files registered: the helpers of some family are not", len(files))
	}
	cmd := exec.Command(py, append([]string{"-c", "import py_compile, sys\nfor f in sys.argv[1:]: py_compile.compile(f, doraise=True)"}, files...)...)
	cmd.Env = append(os.Environ(), "PYTHONPYCACHEPREFIX="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("py_compile: %v\n%s", err, out)
	}
}

// TestPythonModules runs the Python test modules that need only the
// host's python3 (the fast tier); TestRealPythonModules the others, each
// in its toolchain, with the helpers written out in one folder the way
// edgepipe runs them. There a module that skips a test fails: its
// toolchain is installed, so nothing may be missing.
func TestPythonModules(t *testing.T) { runPythonModules(t, false) }

// TestRealPythonModules: see TestPythonModules.
func TestRealPythonModules(t *testing.T) {
	if os.Getenv("EDGEPIPE_REAL") != "1" {
		t.Skip("real tier: set EDGEPIPE_REAL=1 after `go tool task toolchains`")
	}
	runPythonModules(t, true)
}

func runPythonModules(t *testing.T, real bool) {
	found := pythonTestModules(t)
	names := make([]string, 0, len(pythonModules))
	for n := range pythonModules {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		m := pythonModules[name]
		path := found[name]
		if real != (m.toolchain != "") {
			continue
		}
		t.Run(strings.TrimSuffix(name, ".py"), func(t *testing.T) {
			if path == "" {
				t.Skip("not in the tree (TestPythonModulesListed says so)")
			}
			var py, cacheDir string
			if m.toolchain == "" {
				p, err := exec.LookPath("python3")
				if err != nil {
					t.Skip("no python3 on PATH")
				}
				py, cacheDir = p, t.TempDir()
			} else {
				t.Parallel()
				var err error
				cacheDir, err = cache.Root(os.Getenv)
				if err != nil {
					t.Fatal(err)
				}
				tc, err := toolchain.Resolve(cacheDir, m.toolchain)
				if err != nil {
					t.Fatal(err)
				}
				py = tc.Python
			}
			ctx, cancel := context.WithTimeout(context.Background(), max(m.timeout, time.Minute))
			defer cancel()
			helpers, err := toolchain.MaterializeHelpers(cacheDir)
			if err != nil {
				t.Fatal(err)
			}
			tests, err := filepath.Abs(filepath.Dir(path))
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(ctx, py, "-m", "unittest", "-v", strings.TrimSuffix(name, ".py"))
			cmd.Dir = tests
			cmd.Env = append(os.Environ(), "PYTHONPATH="+helpers+string(os.PathListSeparator)+tests, "EDGEPIPE_HELPERS="+helpers,
				"PYTHONPYCACHEPREFIX="+t.TempDir(), "HF_HUB_OFFLINE=1", "OMP_NUM_THREADS=1", "EDGEPIPE_THREADS=1")
			if m.env != nil {
				cmd.Env = append(cmd.Env, m.env(t, ctx, cacheDir)...)
			}
			out, err := cmd.CombinedOutput()
			t.Logf("%s", out)
			if err != nil {
				t.Fatalf("%s failed: %v", name, err)
			}
			if m.toolchain != "" && unittestSkipped.Match(out) {
				t.Fatalf("%s skipped a test in its own toolchain: something it needs is missing", name)
			}
		})
	}
}

func scoringEnv(t *testing.T, ctx context.Context, cacheDir string) []string {
	model, err := toolchain.BuiltinModel(ctx, cacheDir, "smollm2-135m")
	if err != nil {
		t.Fatal(err)
	}
	text, err := data.Materialize("eval", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	logPath, err := filepath.Abs("gguf/testdata/perplexity-base.log")
	if err != nil {
		t.Fatal(err)
	}
	return []string{"EDGEPIPE_PPL_MODEL=" + model, "EDGEPIPE_PPL_TEXT=" + text, "EDGEPIPE_PPL_LOG=" + logPath, "EDGEPIPE_PPL_CHUNKS=4"}
}

func contractEnv(t *testing.T, ctx context.Context, cacheDir string) []string {
	model, err := toolchain.BuiltinModel(ctx, cacheDir, "smollm2-135m")
	if err != nil {
		t.Fatal(err)
	}
	gguf, err := toolchain.BuiltinGGUF(cacheDir, "smollm2-135m")
	if err != nil {
		t.Fatal(err)
	}
	lc, err := toolchain.Resolve(cacheDir, toolchain.LlamaCpp)
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := data.Materialize("tokenizer-corpus", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return []string{"EDGEPIPE_CONTRACT_MODEL=" + model, "EDGEPIPE_CONTRACT_GGUF=" + gguf,
		"EDGEPIPE_CONTRACT_TOKENIZE=" + lc.Tools[toolchain.ToolTokenize], "EDGEPIPE_CONTRACT_CORPUS=" + corpus}
}

func decodeEnv(t *testing.T, ctx context.Context, cacheDir string) []string {
	model, err := toolchain.BuiltinModel(ctx, cacheDir, "smollm2-135m")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prompts, err := data.Materialize("chat-prompts", dir)
	if err != nil {
		t.Fatal(err)
	}
	text, err := data.Materialize("eval", dir)
	if err != nil {
		t.Fatal(err)
	}
	return []string{"EDGEPIPE_DECODE_MODEL=" + model, "EDGEPIPE_DECODE_PROMPTS=" + prompts, "EDGEPIPE_DECODE_TEXT=" + text}
}

// tinyEnv provisions the models whose tokenizers the tiny models copy and
// hands the test the texts and the Go table of pins.
func tinyEnv(t *testing.T, ctx context.Context, cacheDir string) []string {
	tokenizers := map[string]string{}
	for _, m := range toolchain.TinyArchs() {
		if tokenizers[m.Tokenizer] != "" {
			continue
		}
		dir, err := toolchain.BuiltinModel(ctx, cacheDir, m.Tokenizer)
		if err != nil {
			t.Fatal(err)
		}
		tokenizers[m.Tokenizer] = dir
	}
	dir := t.TempDir()
	calibration, err := data.Materialize("calibration", dir)
	if err != nil {
		t.Fatal(err)
	}
	eval, err := data.Materialize("eval", dir)
	if err != nil {
		t.Fatal(err)
	}
	pins, err := json.Marshal(toolchain.TinyArchs())
	if err != nil {
		t.Fatal(err)
	}
	toks, err := json.Marshal(tokenizers)
	if err != nil {
		t.Fatal(err)
	}
	return []string{"EDGEPIPE_TINY_TEXT=" + calibration, "EDGEPIPE_TINY_EVAL=" + eval,
		"EDGEPIPE_TINY_PINS=" + string(pins), "EDGEPIPE_TINY_TOKENIZERS=" + string(toks)}
}

func visionDataEnv(t *testing.T, _ context.Context, _ string) []string {
	dir, err := filepath.Abs("../data")
	if err != nil {
		t.Fatal(err)
	}
	return []string{"EDGEPIPE_VISION_DATA=" + dir}
}

// unittestSkipped matches what unittest -v prints for a skipped test
// ("... skipped 'why'") and its summary ("OK (skipped=1)"), not a test
// whose name has the word.
var unittestSkipped = regexp.MustCompile(`\.\.\. skipped|\(skipped=[0-9]+`)

// The ray toolchain registers in rayexec's init; linking it here makes
// its helpers part of what TestHelpersCompile compiles.
var _ = rayexec.Toolchain

func TestUnittestSkipped(t *testing.T) {
	for out, want := range map[string]bool{
		"test_x (m.C.test_x) ... skipped 'no GPU'\n":                                             true,
		"Ran 3 tests in 1.0s\n\nOK (skipped=1)\n":                                                true,
		"test_a_source_is_skipped_not_passed (m.C.test_a_source_is_skipped_not_passed) ... ok\n": false,
		"Ran 3 tests in 1.0s\n\nOK\n":                                                            false,
	} {
		if got := unittestSkipped.MatchString(out); got != want {
			t.Errorf("unittestSkipped(%q) = %v, want %v", out, got, want)
		}
	}
}
