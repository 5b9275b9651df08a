package edge

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

func TestConfigEstimatesParams(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.json"), llama3Config)
	cfg, err := readHFConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.estimateParams(); got != llama3Params {
		t.Errorf("Llama-3-8B from its dimensions: %d parameters, want %d", got, llama3Params)
	}
	want := catalog.ModelShape{Layers: 32, KVHeads: 8, HeadDim: 128}
	if got := cfg.shape(); got != want {
		t.Errorf("shape %+v, want %+v", got, want)
	}
	// SmolLM2-135M ties its embeddings: 134,515,008 parameters.
	smol := builtinConfigs["smollm2-135m"]
	if got := smol.estimateParams(); got != 134515008 {
		t.Errorf("SmolLM2-135M: %d parameters, want 134515008", got)
	}
	if got := smol.shape(); got != (catalog.ModelShape{Layers: 30, KVHeads: 3, HeadDim: 64}) {
		t.Errorf("SmolLM2-135M shape %+v", got)
	}
}

func TestConfigVariants(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       catalog.ModelShape
		missing    string
	}{
		{"explicit head_dim wins over hidden/heads", `{"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512, "head_dim": 128}`,
			catalog.ModelShape{Layers: 2, KVHeads: 2, HeadDim: 128}, ""},
		{"no num_key_value_heads: one KV head per head", `{"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512}`,
			catalog.ModelShape{Layers: 2, KVHeads: 8, HeadDim: 64}, ""},
		{"null head_dim falls back", `{"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512, "head_dim": null}`,
			catalog.ModelShape{Layers: 2, KVHeads: 8, HeadDim: 64}, ""},
		{"multimodal text_config", `{"text_config": {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 1, "hidden_size": 256}}`,
			catalog.ModelShape{Layers: 4, KVHeads: 1, HeadDim: 64}, ""},
		{"hidden size only", `{"hidden_size": 512}`, catalog.ModelShape{}, "num_hidden_layers, num_key_value_heads (or num_attention_heads), head_dim (or hidden_size and num_attention_heads)"},
	} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "config.json"), tc.json)
		cfg, err := readHFConfig(filepath.Join(dir, "config.json"))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := cfg.shape(); got != tc.want {
			t.Errorf("%s: shape %+v, want %+v", tc.name, got, tc.want)
		}
		if got := strings.Join(cfg.missingKVFields(), ", "); got != tc.missing {
			t.Errorf("%s: missing %q, want %q", tc.name, got, tc.missing)
		}
		if cfg.estimateParams() != 0 {
			t.Errorf("%s: estimated parameters without vocab and MLP sizes", tc.name)
		}
	}
}

func TestSafetensorsHeaders(t *testing.T) {
	dir := t.TempDir()
	writeSafetensorsHeader(t, filepath.Join(dir, "model.safetensors"), llama3Tensors(0, 32, true))
	n, files, err := safetensorsParams(dir)
	if err != nil || n != llama3Params || files != 1 {
		t.Errorf("one file: %d parameters in %d files, %v; want %d in 1", n, files, err, llama3Params)
	}

	// Sharded: the index names the shards; a stray consolidated copy of the
	// same weights beside them must not be counted twice.
	sharded := t.TempDir()
	writeSafetensorsHeader(t, filepath.Join(sharded, "model-00001-of-00002.safetensors"), llama3Tensors(0, 16, true))
	writeSafetensorsHeader(t, filepath.Join(sharded, "model-00002-of-00002.safetensors"), llama3Tensors(16, 32, false))
	writeSafetensorsHeader(t, filepath.Join(sharded, "consolidated.safetensors"), llama3Tensors(0, 32, true))
	writeFile(t, filepath.Join(sharded, "model.safetensors.index.json"),
		`{"metadata": {"total_size": 16060522496}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}}`)
	n, files, err = safetensorsParams(sharded)
	if err != nil || n != llama3Params || files != 2 {
		t.Errorf("sharded: %d parameters in %d files, %v; want %d in 2", n, files, err, llama3Params)
	}
	// Without the index every top-level file counts.
	os.Remove(filepath.Join(sharded, "model.safetensors.index.json"))
	if n, files, _ = safetensorsParams(sharded); n != 2*llama3Params || files != 3 {
		t.Errorf("no index: %d parameters in %d files", n, files)
	}
}

func TestLargestTensorBytes(t *testing.T) {
	sharded := t.TempDir()
	writeSafetensorsHeader(t, filepath.Join(sharded, "model-00001-of-00002.safetensors"), llama3Tensors(0, 16, false))
	writeSafetensorsHeader(t, filepath.Join(sharded, "model-00002-of-00002.safetensors"), llama3Tensors(16, 32, true))
	// The embedding (128256 x 4096 BF16), in the second shard, is the largest.
	if n, err := LargestTensorBytes(sharded); err != nil || n != 128256*4096*2 {
		t.Errorf("largest tensor: %d, %v; want %d", n, err, 128256*4096*2)
	}
	// Data offsets, where the header has them, are the tensor's size.
	one := t.TempDir()
	writeSafetensorsHeader(t, filepath.Join(one, "model.safetensors"), map[string]tensor{
		"a": {Dtype: "F32", Shape: []int64{4, 8}, DataOffsets: []int64{0, 128}},
		"b": {Dtype: "F32", Shape: []int64{100}, DataOffsets: []int64{128, 528}},
	})
	if n, err := LargestTensorBytes(one); err != nil || n != 400 {
		t.Errorf("largest tensor: %d, %v; want 400", n, err)
	}
	if _, err := LargestTensorBytes(t.TempDir()); err == nil {
		t.Error("a folder without weights has no largest tensor")
	}
}

func TestSafetensorsRefusesWhatItCannotCount(t *testing.T) {
	for _, tc := range []struct {
		name    string
		write   func(t *testing.T, path string)
		wantErr string
	}{
		{"not safetensors", func(t *testing.T, p string) { writeFile(t, p, "stand-in weights") }, "header length"},
		{"too short", func(t *testing.T, p string) { writeFile(t, p, "abc") }, "shorter than"},
		{"header not JSON", func(t *testing.T, p string) { writeFile(t, p, "\x05\x00\x00\x00\x00\x00\x00\x00hello") }, "not JSON"},
		{"header cut short", func(t *testing.T, p string) { writeFile(t, p, "\x50\x00\x00\x00\x00\x00\x00\x00{}") }, "cut short"},
		{"quantized", func(t *testing.T, p string) {
			writeSafetensorsHeader(t, p, map[string]tensor{"w.qweight": {Dtype: "I32", Shape: []int64{512, 4096}}})
		}, "quantized checkpoint"},
		{"negative shape", func(t *testing.T, p string) {
			writeSafetensorsHeader(t, p, map[string]tensor{"w": {Dtype: "F16", Shape: []int64{-1, 4}}})
		}, "not plausible"},
	} {
		dir := t.TempDir()
		tc.write(t, filepath.Join(dir, "model.safetensors"))
		if _, _, err := safetensorsParams(dir); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
	if _, _, err := safetensorsParams(t.TempDir()); err == nil {
		t.Error("an empty folder counted parameters")
	}
}

func TestResolveLocalFolder(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "m")
	writeFile(t, filepath.Join(dir, "config.json"), llama3Config)

	// Dimensions only: the estimate.
	m := ResolveModel("./m", base)
	want := catalog.ModelShape{Layers: 32, KVHeads: 8, HeadDim: 128, Params: llama3Params}
	if m.Shape != want || !strings.Contains(m.From, "estimated from config.json") || len(m.Notes) != 0 {
		t.Errorf("config only: %+v", m)
	}

	// The headers win over the estimate: declare a different count to see
	// which one was used.
	writeSafetensorsHeader(t, filepath.Join(dir, "model.safetensors"), llama3Tensors(0, 16, true))
	m = ResolveModel(dir, "/elsewhere")
	if m.Shape.Params == llama3Params || m.Shape.Params == 0 || !strings.Contains(m.From, "1 safetensors header") {
		t.Errorf("with a header: %+v", m)
	}

	// Unreadable weights fall back to the estimate without a note.
	writeFile(t, filepath.Join(dir, "model.safetensors"), "stand-in weights")
	if m = ResolveModel("./m", base); m.Shape.Params != llama3Params || len(m.Notes) != 0 {
		t.Errorf("junk weights: %+v", m)
	}

	// A stand-in model (the CLI tests') has no shape: notes, not errors.
	writeFile(t, filepath.Join(dir, "config.json"), `{"hidden_size": 512}`)
	m = ResolveModel("./m", base)
	if m.HasKVShape() || m.HasParams() || len(m.Notes) != 2 {
		t.Errorf("stand-in model: %+v", m)
	}
	if m = ResolveModel("./nope", base); len(m.Notes) != 1 || !strings.Contains(m.Notes[0], "not there") {
		t.Errorf("missing folder: %+v", m)
	}
}

func TestResolveBuiltinAndRemote(t *testing.T) {
	m := ResolveModel("builtin:smollm2-135m", "")
	if m.Shape != (catalog.ModelShape{Layers: 30, KVHeads: 3, HeadDim: 64, Params: 134515008}) || len(m.Notes) != 0 {
		t.Errorf("builtin: %+v", m)
	}
	if m := ResolveModel("builtin:nope", ""); m.HasParams() || !strings.Contains(strings.Join(m.Notes, ""), "builtin:smollm2-135m") {
		t.Errorf("unknown builtin: %+v", m)
	}
	for _, src := range []string{"https://example.com/m.tar.gz", "s3::https://bucket/m", "git::https://example.com/m.git"} {
		if m := ResolveModel(src, ""); m.HasParams() || len(m.Notes) != 1 || !strings.Contains(m.Notes[0], "run time") {
			t.Errorf("%s: %+v", src, m)
		}
	}
}

func TestResolveHFFromLocalCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_HOME", t.TempDir())

	m := ResolveModel("hf://meta-llama/Meta-Llama-3-8B", "")
	if m.HasParams() || len(m.Notes) != 1 || !strings.Contains(m.Notes[0], "not in the local Hugging Face cache") ||
		!strings.Contains(m.Notes[0], "plan time does not use the network") {
		t.Errorf("not cached: %+v", m)
	}

	const commit = "8cde5ca8380496c9a6cc7ef3a8b46a0372a1d920"
	root := filepath.Join(cache, "models--meta-llama--Meta-Llama-3-8B")
	writeFile(t, filepath.Join(root, "refs", "main"), commit)
	writeFile(t, filepath.Join(root, "snapshots", commit, "config.json"), llama3Config)
	m = ResolveModel("hf://meta-llama/Meta-Llama-3-8B", "")
	if m.Shape != (catalog.ModelShape{Layers: 32, KVHeads: 8, HeadDim: 128, Params: llama3Params}) {
		t.Errorf("cached at main: %+v", m)
	}
	if m = ResolveModel("hf://meta-llama/Meta-Llama-3-8B@"+commit, ""); m.Shape.Params != llama3Params {
		t.Errorf("cached at a commit: %+v", m)
	}
	if m = ResolveModel("hf://meta-llama/Meta-Llama-3-8B@v2", ""); m.HasParams() {
		t.Errorf("a revision that was never downloaded resolved: %+v", m)
	}
}

// TestResolveModelRefusesUnusableFiles: a weights file or config.json that
// is a FIFO, and an index naming files outside the folder, make the source
// unusable (a Problem, which plan and pick refuse), and reading them never
// waits for a writer.
func TestResolveModelRefusesUnusableFiles(t *testing.T) {
	cfg := `{"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}`
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"FIFO weights", func(t *testing.T, dir string) {
			mkfifo(t, filepath.Join(dir, "model.safetensors"))
		}, "model.safetensors is a named pipe (FIFO), not a regular file: a model folder holds regular files only"},
		{"FIFO config.json", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "config.json"))
			mkfifo(t, filepath.Join(dir, "config.json"))
		}, "config.json is a named pipe (FIFO)"},
		{"FIFO index", func(t *testing.T, dir string) {
			mkfifo(t, filepath.Join(dir, indexFile))
		}, "model.safetensors.index.json is a named pipe (FIFO)"},
		{"FIFO shard named by the index", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, indexFile), `{"weight_map": {"a": "part-1.safetensors"}}`)
			mkfifo(t, filepath.Join(dir, "part-1.safetensors"))
		}, "part-1.safetensors is a named pipe (FIFO)"},
		{"index climbing out", func(t *testing.T, dir string) {
			mkfifo(t, filepath.Join(filepath.Dir(dir), "x"))
			writeFile(t, filepath.Join(dir, indexFile), `{"weight_map": {"a": "../x"}}`)
		}, `names "../x", which is outside the model folder`},
		{"index naming an absolute path", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, indexFile), `{"weight_map": {"a": "/etc/passwd"}}`)
		}, `names "/etc/passwd", which is outside the model folder`},
		{"index naming a Windows path", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, indexFile), `{"weight_map": {"a": "..\\x"}}`)
		}, `which is outside the model folder`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "model")
			writeFile(t, filepath.Join(dir, "config.json"), cfg)
			tc.setup(t, dir)
			done := make(chan Model, 1)
			go func() { done <- ResolveModel(dir, "") }()
			var m Model
			select {
			case m = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("ResolveModel blocked")
			}
			if got := strings.Join(m.Problems, "\n"); !strings.Contains(got, tc.want) {
				t.Errorf("problems %q, want one containing %q (notes %q)", got, tc.want, m.Notes)
			}
			if _, err := PickTarget(PickRequest{Platform: "ios", Model: m}); err == nil {
				t.Error("PickTarget took an unusable model")
			}
		})
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The tiny models' shapes: every built-in language model has one, and the
// estimate is within 0.02% of what tiny_model.py reported (the biases and
// the q/k norms are all it leaves out).
func TestTinyBuiltinShapes(t *testing.T) {
	params := map[string]int64{
		"tiny-llama": 6439488, "tiny-qwen2": 3294272, "tiny-qwen3": 3293888, "tiny-gemma3": 8457184,
		"tiny-phi3": 6439488, "tiny-mistral": 6439488, "tiny-qwen3-moe": 6538944, "tiny-mixtral": 6735424,
	}
	for _, n := range toolchain.BuiltinNames() {
		if _, ok := builtinConfigs[n]; !ok && !toolchain.IsVisionBuiltin(n) {
			t.Errorf("builtin:%s has no shape for the pre-flight", n)
		}
	}
	for name, want := range params {
		m := ResolveModel("builtin:"+name, "")
		if len(m.Notes) != 0 || m.MaxContext != 4096 || !m.HasKVShape() {
			t.Errorf("%s: %+v", name, m)
		}
		if got := m.Shape.Params; math.Abs(float64(got-want))/float64(want) > 0.0002 {
			t.Errorf("%s: estimated %d parameters, tiny_model.py counted %d", name, got, want)
		}
	}
	if got := ResolveModel("builtin:tiny-gemma3", "").Shape; got != (catalog.ModelShape{Layers: 6, KVHeads: 1, HeadDim: 16, Params: got.Params}) {
		t.Errorf("tiny-gemma3 shape %+v", got)
	}
}

// The architecture every family's refusal reads comes from the source
// without its weights: a builtin's table, config.json's model_type (a
// multimodal checkpoint's own, not its text_config's).
func TestResolveArchitecture(t *testing.T) {
	for name, want := range map[string]string{
		"smollm2-135m": "llama", "gemma3-270m": "gemma3_text", "tiny-llama": "llama", "tiny-qwen2": "qwen2",
		"tiny-qwen3": "qwen3", "tiny-gemma3": "gemma3_text", "tiny-phi3": "phi3", "tiny-mistral": "mistral",
		"tiny-qwen3-moe": "qwen3_moe", "tiny-mixtral": "mixtral",
	} {
		if got := ResolveModel("builtin:"+name, "").Architecture; got != want {
			t.Errorf("builtin:%s architecture %q, want %q", name, got, want)
		}
	}
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "q", "config.json"), `{"model_type": "qwen2", "num_hidden_layers": 2}`)
	if got := ResolveModel("./q", base).Architecture; got != "qwen2" {
		t.Errorf("config.json architecture %q", got)
	}
	writeFile(t, filepath.Join(base, "g", "config.json"), `{"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 2}}`)
	if got := ResolveModel("./g", base).Architecture; got != "gemma3" {
		t.Errorf("multimodal config.json architecture %q, want the checkpoint's own gemma3", got)
	}
	if got := ResolveModel("hf://nobody/uncached", base).Architecture; got != "" {
		t.Errorf("a source plan time cannot read has architecture %q", got)
	}
}
