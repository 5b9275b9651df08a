package toolchain

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestLockDigestKeysTheInstallFolder(t *testing.T) {
	lock, err := os.ReadFile("llama.lock")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := Lookup(Llama)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Digest() != sha(lock) {
		t.Fatalf("llama digest %s is not the sha256 of internal/toolchain/llama.lock (%s)", spec.Digest(), sha(lock))
	}
	if want := "llama-" + sha(lock)[:16]; spec.DirName() != want {
		t.Fatalf("DirName = %s, want %s", spec.DirName(), want)
	}
	other := spec
	other.Lock += "numpy==2.2.7\n"
	if other.DirName() == spec.DirName() {
		t.Fatal("a different lock must install into a different folder")
	}
	// Every toolchain gets its own folder.
	seen := map[string]string{}
	for _, s := range Specs() {
		if s.Kind == KindExternal {
			continue
		}
		if prev, dup := seen[s.DirName()]; dup {
			t.Fatalf("%s and %s share folder %s", prev, s.Name, s.DirName())
		}
		seen[s.DirName()] = s.Name
	}
}

func TestLlamaCppKeyCoversSourceAndFlags(t *testing.T) {
	spec, err := Lookup(LlamaCpp)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{llamaCppSdist.SHA256, "-DBUILD_SHARED_LIBS=OFF", "recipe " + llamaCppBuildRecipe, "targets llama-quantize llama-perplexity llama-imatrix llama-bench llama-tokenize"} {
		if !strings.Contains(spec.Lock, want) {
			t.Errorf("llamacpp build pin lacks %q:\n%s", want, spec.Lock)
		}
	}
	if !strings.HasPrefix(spec.DirName(), "llamacpp-"+llamaCppPythonVersion+"-") {
		t.Errorf("DirName = %s", spec.DirName())
	}
	// x86-64 builds are portable and keyed by the target; native builds
	// elsewhere are keyed by the CPU they were tuned for.
	amd := llamaCppBuildPin("amd64")
	if !strings.Contains(amd, "-DGGML_NATIVE=OFF") || strings.Contains(amd, "cpu ") {
		t.Errorf("amd64 pin:\n%s", amd)
	}
	arm := llamaCppBuildPin("arm64")
	if !strings.Contains(arm, "-DGGML_NATIVE=ON") || !strings.Contains(arm, "cpu "+cpuIdentity()) {
		t.Errorf("arm64 pin:\n%s", arm)
	}
}

func TestResolveOnEmptyCacheSaysHowToInstall(t *testing.T) {
	cache := t.TempDir()
	for _, name := range []string{UV, Llama, LlamaCpp} {
		_, err := Resolve(cache, name)
		if err == nil || !strings.Contains(err.Error(), "edgepipe toolchain install "+name) {
			t.Errorf("Resolve(%s) = %v, want an error naming the install command", name, err)
		}
	}
	if _, err := Resolve(cache, "nope"); err == nil || !strings.Contains(err.Error(), "llamacpp") {
		t.Errorf("unknown toolchain: %v", err)
	}
}

// fakeInstall lays out a finished install the way Install does, via finish.
func fakeInstall(t *testing.T, cache string, spec Spec, files map[string]string, digest string) string {
	t.Helper()
	root := toolchainsDir(cache)
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(root, ".tmp-"+spec.Name+"-")
	if err != nil {
		t.Fatal(err)
	}
	for rel, body := range files {
		p := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	final := filepath.Join(root, spec.DirName())
	if err := finish(tmp, final, marker{Format: markerFormat, Name: spec.Name, Kind: spec.Kind, LockDigest: digest,
		Versions: map[string]string{"python": "3.11.7", "torch": "2.11.0"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary folder %s still there after finish", tmp)
	}
	if st, err := os.Stat(final); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("install folder mode %v (%v), want 0755", st.Mode(), err)
	}
	return final
}

func TestMarkerMakesAnInstallVisible(t *testing.T) {
	cache := t.TempDir()
	spec, _ := Lookup(Llama)
	dir := filepath.Join(toolchainsDir(cache), spec.DirName())

	// A folder without the marker (a killed install that was renamed by
	// hand, or a half-deleted one) is not an install.
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "python"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(cache, Llama); err == nil {
		t.Fatal("an unmarked folder resolved as installed")
	}

	// finish replaces the unmarked folder.
	fakeInstall(t, cache, spec, map[string]string{"bin/python": "#!/bin/sh\n"}, spec.Digest())
	inst, err := Resolve(cache, Llama)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Python != filepath.Join(dir, "bin", "python") || inst.Versions["torch"] != "2.11.0" || inst.LockDigest != "sha256:"+spec.Digest() {
		t.Fatalf("resolved %+v", inst)
	}
	if got := inst.Summary(); got != "python 3.11.7, torch 2.11.0" {
		t.Errorf("Summary = %q", got)
	}

	// A second finish into a marked folder is refused, not merged.
	tmp, _ := os.MkdirTemp(toolchainsDir(cache), ".tmp-llama-")
	if err := finish(tmp, dir, marker{Format: markerFormat, Name: Llama}); err == nil {
		t.Fatal("finish overwrote a complete install")
	}
}

func TestMarkerFromAnotherLockIsRejected(t *testing.T) {
	cache := t.TempDir()
	spec, _ := Lookup(Llama)
	fakeInstall(t, cache, spec, map[string]string{"bin/python": ""}, strings.Repeat("0", 64))
	_, err := Resolve(cache, Llama)
	if err == nil || !strings.Contains(err.Error(), "another lock") {
		t.Fatalf("Resolve = %v, want a lock mismatch", err)
	}
}

func TestDamagedInstallIsReported(t *testing.T) {
	cache := t.TempDir()
	spec, _ := Lookup(UV)
	dir := fakeInstall(t, cache, spec, map[string]string{"bin/uv": ""}, spec.Digest())
	if _, err := Resolve(cache, UV); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "bin", "uv"))
	if _, err := Resolve(cache, UV); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Resolve = %v, want damaged", err)
	}
}

func TestHelperScriptsAndToolIdentity(t *testing.T) {
	cache := t.TempDir()
	llama, _ := Lookup(Llama)
	fakeInstall(t, cache, llama, map[string]string{"bin/python": ""}, llama.Digest())
	inst, err := Resolve(cache, Llama)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{ToolGGUFToHF, ToolHFPPL} {
		want := []byte(testHelpers[tool].Data)
		got, err := os.ReadFile(inst.Tools[tool])
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s in the cache differs from the registered script (%v)", tool, err)
		}
		argv, id, err := inst.Tool(tool)
		if err != nil {
			t.Fatal(err)
		}
		if len(argv) != 2 || argv[0] != inst.Python || argv[1] != inst.Tools[tool] {
			t.Errorf("argv = %q", argv)
		}
		closure := tool + " " + sha(want) + "\n"
		if tool == ToolHFPPL {
			// It imports the shared scorer: its bytes are part of what the
			// tool is.
			closure += "closure_leaf.py " + sha([]byte(testHelpers["closure_leaf.py"].Data)) + "\n" +
				"ppl_scoring.py " + sha([]byte(testHelpers["ppl_scoring.py"].Data)) + "\n"
		}
		if wantID := inst.LockDigest + "+sha256:" + sha([]byte(closure)); id != wantID {
			t.Errorf("%s: identity = %s, want %s", tool, id, wantID)
		}
	}

	// llamacpp's converter runs with llama's interpreter, and its identity
	// covers both toolchains.
	lc, _ := Lookup(LlamaCpp)
	fakeInstall(t, cache, lc, map[string]string{
		"bin/llama-quantize": "", "bin/llama-perplexity": "", "bin/llama-imatrix": "", "bin/llama-bench": "", "bin/llama-tokenize": "", "src/convert_hf_to_gguf.py": "",
	}, lc.Digest())
	argv, id, version, tc, err := FindTool(cache, ToolConvertHF)
	if err != nil {
		t.Fatal(err)
	}
	if tc != LlamaCpp || argv[0] != inst.Python || !strings.HasSuffix(argv[1], "src/convert_hf_to_gguf.py") {
		t.Errorf("FindTool: %q %s", argv, tc)
	}
	if id != "sha256:"+lc.Digest()+"+"+inst.LockDigest {
		t.Errorf("identity = %s", id)
	}
	if version == "" {
		t.Error("empty version")
	}
	argv, id, _, _, err = FindTool(cache, ToolQuantize)
	if err != nil || len(argv) != 1 || id != "sha256:"+lc.Digest() {
		t.Errorf("quantize: %q %s %v", argv, id, err)
	}
	if _, _, _, _, err := FindTool(cache, "optimum-cli"); err == nil {
		t.Error("found a tool no toolchain provides")
	}
}

func TestDoctorOnEmptyCache(t *testing.T) {
	st := Doctor(t.TempDir())
	byName := map[string]ToolStatus{}
	for _, s := range st {
		byName[s.Name] = s
	}
	for tool, tc := range map[string]string{
		"uv": UV, ToolPython: Llama, ToolHFPPL: Llama, ToolQuantize: LlamaCpp, ToolConvertHF: LlamaCpp,
		"builtin:smollm2-135m": "builtin:smollm2-135m",
	} {
		s, ok := byName[tool]
		if !ok {
			t.Errorf("doctor does not list %s", tool)
			continue
		}
		if s.Found {
			t.Errorf("%s found in an empty cache", tool)
		}
		if s.InstallCommand != "edgepipe toolchain install "+tc {
			t.Errorf("%s: install command %q", tool, s.InstallCommand)
		}
	}
	if s, ok := byName["cmake"]; !ok || (!s.Found && s.Note == "") {
		t.Errorf("cmake status %+v", s)
	}
}

// fakeIndex serves one file the way PyPI's simple index does.
func fakeIndex(t *testing.T, project, filename string, body []byte, published string, jsonAPI bool) (*httptest.Server, *int32) {
	t.Helper()
	var downloads int32
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/"+project+"/", func(w http.ResponseWriter, r *http.Request) {
		if jsonAPI && strings.Contains(r.Header.Get("Accept"), "vnd.pypi.simple.v1+json") {
			w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
			json.NewEncoder(w).Encode(map[string]any{"files": []map[string]any{
				{"filename": "other-1.0.tar.gz", "url": "/files/other", "hashes": map[string]string{"sha256": "00"}},
				{"filename": filename, "url": "../../files/" + filename, "hashes": map[string]string{"sha256": published}},
			}})
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><a href="/files/%s#sha256=%s" data-requires-python="&gt;=3.8">%s</a></body></html>`, filename, published, filename)
	})
	mux.HandleFunc("/files/"+filename, func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&downloads, 1)
		w.Write(body)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Setenv("EDGEPIPE_PYPI_INDEX", srv.URL+"/simple")
	return srv, &downloads
}

func TestFetchPinVerifiesAndReuses(t *testing.T) {
	for _, jsonAPI := range []bool{true, false} {
		t.Run(fmt.Sprintf("json=%v", jsonAPI), func(t *testing.T) {
			body := []byte("wheel bytes")
			_, downloads := fakeIndex(t, "my-pkg", "my_pkg-1.0-py3-none-any.whl", body, sha(body), jsonAPI)
			cache := t.TempDir()
			pin := Pin{Project: "My_Pkg", Filename: "my_pkg-1.0-py3-none-any.whl", SHA256: sha(body)}
			var log bytes.Buffer
			p, err := fetchPin(context.Background(), cache, pin, &log)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(p); !bytes.Equal(got, body) {
				t.Fatalf("downloaded %q", got)
			}
			if _, err := fetchPin(context.Background(), cache, pin, &log); err != nil {
				t.Fatal(err)
			}
			if *downloads != 1 {
				t.Fatalf("downloaded %d times, want once", *downloads)
			}
			// A corrupted cached file is replaced, not trusted.
			os.WriteFile(p, []byte("rotten"), 0o644)
			if _, err := fetchPin(context.Background(), cache, pin, &log); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(p); !bytes.Equal(got, body) || *downloads != 2 {
				t.Fatalf("corrupt cache not refetched: %q after %d downloads", got, *downloads)
			}
		})
	}
}

func TestFetchPinRefusesOtherBytes(t *testing.T) {
	body := []byte("tampered")
	cache := t.TempDir()
	want := sha([]byte("the real thing"))
	pin := Pin{Project: "pkg", Filename: "pkg-1.0.tar.gz", SHA256: want}

	// The index publishes another hash: refused before downloading.
	_, downloads := fakeIndex(t, "pkg", pin.Filename, body, sha(body), true)
	_, err := fetchPin(context.Background(), cache, pin, nil2())
	if err == nil || !strings.Contains(err.Error(), "refusing") || *downloads != 0 {
		t.Fatalf("err = %v after %d downloads", err, *downloads)
	}
	// The index publishes the pinned hash but serves other bytes: nothing kept.
	_, downloads = fakeIndex(t, "pkg", pin.Filename, body, want, false)
	_, err = fetchPin(context.Background(), cache, pin, nil2())
	if err == nil || !strings.Contains(err.Error(), "nothing was kept") || *downloads != 1 {
		t.Fatalf("err = %v after %d downloads", err, *downloads)
	}
	ents, _ := os.ReadDir(filepath.Join(cache, "downloads"))
	if len(ents) != 0 {
		t.Fatalf("downloads folder keeps %v", ents)
	}
	// A file missing from the index.
	missing := Pin{Project: "pkg", Filename: "pkg-2.0.tar.gz", SHA256: want}
	if _, err := fetchPin(context.Background(), cache, missing, nil2()); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing file: %v", err)
	}
}

func nil2() *bytes.Buffer { return &bytes.Buffer{} }

func tarGz(t *testing.T, entries []tar.Header, bodies map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		h := h
		b := bodies[h.Name]
		h.Size = int64(len(b))
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(b))
	}
	tw.Close()
	gz.Close()
	p := filepath.Join(t.TempDir(), "a.tar.gz")
	os.WriteFile(p, buf.Bytes(), 0o644)
	return p
}

func TestExtractTarGz(t *testing.T) {
	pre := "pkg-1/vendor/llama.cpp/"
	ok := tarGz(t, []tar.Header{
		{Name: "pkg-1/setup.py", Typeflag: tar.TypeReg},
		{Name: pre + ".git", Typeflag: tar.TypeReg},
		{Name: pre + "convert_hf_to_gguf.py", Typeflag: tar.TypeReg, Mode: 0o755},
		{Name: pre + "gguf-py/gguf/__init__.py", Typeflag: tar.TypeReg},
	}, map[string]string{pre + "convert_hf_to_gguf.py": "print(1)", pre + "gguf-py/gguf/__init__.py": "x", "pkg-1/setup.py": "no"})
	dst := t.TempDir()
	if err := extractTarGz(ok, pre, dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "gguf-py/gguf/__init__.py")); string(b) != "x" {
		t.Fatalf("got %q", b)
	}
	for _, n := range []string{"setup.py", ".git"} {
		if _, err := os.Stat(filepath.Join(dst, n)); err == nil {
			t.Fatalf("extracted %s", n)
		}
	}
	if st, _ := os.Stat(filepath.Join(dst, "convert_hf_to_gguf.py")); st.Mode()&0o100 == 0 {
		t.Fatal("lost the executable bit")
	}

	for name, h := range map[string]tar.Header{
		"dotdot":  {Name: pre + "../../evil.sh", Typeflag: tar.TypeReg},
		"symlink": {Name: pre + "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
	} {
		bad := tarGz(t, []tar.Header{h}, nil)
		if err := extractTarGz(bad, pre, t.TempDir()); err == nil {
			t.Errorf("%s: extracted", name)
		}
	}
	empty := tarGz(t, []tar.Header{{Name: "pkg-1/setup.py", Typeflag: tar.TypeReg}}, nil)
	if err := extractTarGz(empty, pre, t.TempDir()); err == nil {
		t.Error("an archive without the tree passed")
	}
}

func TestPruneTreeKeepsConverter(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"convert_hf_to_gguf.py", "gguf-py/x", "conversion/llama.py", "ggml/src/a.c", "tools/x.cpp", "README.md"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(n)), 0o755)
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	if err := pruneTree(dir, llamaCppKeep); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "conversion convert_hf_to_gguf.py gguf-py" {
		t.Fatalf("kept %v", names)
	}
}

func TestLockFileWaitsForHolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := lockFile(context.Background(), p, nil2())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var msg bytes.Buffer
	if _, err := lockFile(ctx, p, &msg); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock: %v", err)
	}
	if !strings.Contains(msg.String(), "waiting") {
		t.Errorf("no waiting message: %q", msg.String())
	}
	unlock()
	unlock2, err := lockFile(context.Background(), p, nil2())
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
}

func TestLeftoversAreRemovedOnlyForTheirToolchain(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{".tmp-llama-123", ".tmp-llamacpp-9", "llama-abc"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	removeLeftovers(root, ".tmp-llama-")
	for d, want := range map[string]bool{".tmp-llama-123": false, ".tmp-llamacpp-9": true, "llama-abc": true} {
		_, err := os.Stat(filepath.Join(root, d))
		if (err == nil) != want {
			t.Errorf("%s exists=%v, want %v", d, err == nil, want)
		}
	}
}

func TestParseFreezeAndPyvenv(t *testing.T) {
	v := parseFreeze("Torch==2.11.0\ntransformers==4.57.6\n-e git+x#egg=y\n\n")
	if v["torch"] != "2.11.0" || v["transformers"] != "4.57.6" || len(v) != 2 {
		t.Fatalf("%v", v)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pyvenv.cfg"), []byte("home = /usr/bin\nimplementation = CPython\nversion_info = 3.11.7\n"), 0o644)
	if got := venvPythonVersion(dir); got != "3.11.7" {
		t.Fatalf("version %q", got)
	}
}

func TestWheelScriptPath(t *testing.T) {
	if got := wheelScript(uvPins[0], "uv"); got != "uv-0.13.8.data/scripts/uv" {
		t.Fatalf("%s", got)
	}
}

func TestBuiltinModelNeedsLlama(t *testing.T) {
	_, err := BuiltinModel(context.Background(), t.TempDir(), "builtin:smollm2-135m")
	if err == nil || !strings.Contains(err.Error(), "edgepipe toolchain install llama") {
		t.Fatalf("err = %v", err)
	}
	if _, err := BuiltinModel(context.Background(), t.TempDir(), "builtin:gpt-5"); err == nil || !strings.Contains(err.Error(), "builtin:smollm2-135m") {
		t.Fatalf("unknown model: %v", err)
	}
}

func TestExternalPrerequisiteIsExplainedNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Install(context.Background(), t.TempDir(), "cmake", nil2())
	if err == nil || !strings.Contains(err.Error(), "apt-get install cmake") {
		t.Fatalf("err = %v", err)
	}
	for _, st := range Doctor(t.TempDir()) {
		if st.Name == "cmake" && (st.Found || st.InstallCommand != "" || !strings.Contains(st.Note, "cmake")) {
			t.Fatalf("doctor: %+v", st)
		}
	}
}

func TestBuiltinKeyIgnoresOtherHelpers(t *testing.T) {
	root, _, err := builtinRoot("/c", "smollm2-135m")
	if err != nil {
		t.Fatal(err)
	}
	id, err := HelperIdentity(ToolGGUFToHF)
	if err != nil {
		t.Fatal(err)
	}
	llama, _ := Lookup(Llama)
	m := builtinModels["smollm2-135m"]
	want := sha([]byte(m.pinDigest() + "\n" + m.ggufSHA256 + "\n" + id + "\n" + llama.Digest()))[:16]
	if filepath.Base(root) != "smollm2-135m-"+want {
		t.Fatalf("builtin folder %s, want key %s (wheel, GGUF, gguf_to_hf.py's closure, llama lock)", root, want)
	}
	RegisterHelpers("another-family", fstest.MapFS{"other_family_helper.py": {Data: []byte("import ppl_scoring\n")}})
	if again, _, _ := builtinRoot("/c", "smollm2-135m"); again != root {
		t.Fatalf("a new helper of another family moved the built-in model's key: %s -> %s", root, again)
	}
}

// A recipe's tools name the toolchains to install, with the ones those
// need first; tools found elsewhere need nothing.
func TestNeededInInstallOrder(t *testing.T) {
	dir := t.TempDir()
	got := Needed(dir, []string{ToolQuantize, ToolHFPPL, "no-such-tool"}, nil)
	var names []string
	for _, n := range got {
		names = append(names, n.Name)
		if n.Installed {
			t.Errorf("%s installed in an empty cache", n.Name)
		}
	}
	if strings.Join(names, " ") != "uv llama llamacpp" {
		t.Fatalf("needed %v, want uv llama llamacpp", names)
	}
	if got[0].Why() != "needed to install llama" || got[2].Why() != "runs llama-quantize" {
		t.Errorf("why: %q, %q", got[0].Why(), got[2].Why())
	}
	if n := Needed(dir, []string{ToolQuantize}, func(string) bool { return true }); len(n) != 0 {
		t.Errorf("a local tool still needs %v", n)
	}
	if n := NeededNames(dir, LlamaCpp); len(n) != 3 {
		t.Errorf("installing llamacpp installs %v", n)
	}
	err := Ensure(context.Background(), dir, got, false, "edgepipe toolchain install --for r.yaml", io.Discard)
	var ni *NotInstalledError
	if !errors.As(err, &ni) || len(ni.Missing) != 3 || !strings.Contains(err.Error(), "--for r.yaml") {
		t.Errorf("Ensure without install: %v", err)
	}
}
