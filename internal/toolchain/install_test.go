package toolchain

import (
	"archive/zip"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fakeUV installs a uv toolchain whose uv is a shell script: it records
// each command line (and UV_CACHE_DIR) in CACHE/uv.log, makes a venv
// whose python exits with pyExit, and prints a freeze list.
func fakeUV(t *testing.T, cache string, pyExit int) string {
	t.Helper()
	spec, _ := Lookup(UV)
	script := `#!/bin/sh
echo "$UV_CACHE_DIR $*" >> "` + filepath.Join(cache, "uv.log") + `"
case "$1 $2" in
venv*)
	for dir; do :; done
	mkdir -p "$dir/bin"
	printf '#!/bin/sh\necho "python $*" >> "` + filepath.Join(cache, "uv.log") + `"\nexit ` + string(rune('0'+pyExit)) + `\n' > "$dir/bin/python"
	chmod +x "$dir/bin/python"
	printf 'home = /usr/bin\nversion_info = 3.11.9\n' > "$dir/pyvenv.cfg"
	;;
"pip freeze")
	printf 'Torch==2.11.0\ntransformers==4.57.6\n'
	;;
esac
`
	dir := fakeInstall(t, cache, spec, map[string]string{"bin/uv": script}, spec.Digest())
	// fakeInstall's versions are a Python toolchain's; uv's own is the one
	// an install records.
	b, _ := os.ReadFile(filepath.Join(dir, markerFile))
	b = bytes.Replace(b, []byte(`"python": "3.11.7"`), []byte(`"uv": "0.13.8"`), 1)
	if err := os.WriteFile(filepath.Join(dir, markerFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(cache, "uv.log")
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// A Python toolchain is a venv made by uv, synced to the lock with hashes
// required, checked by importing its packages, and recorded with the
// versions pip freeze reports; only then is it renamed into place.
func TestInstallPythonToolchain(t *testing.T) {
	t.Setenv("UV_CACHE_DIR", "")
	cache := t.TempDir()
	uvLog := fakeUV(t, cache, 0)
	var progress bytes.Buffer
	inst, err := Install(context.Background(), cache, Llama, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	spec, _ := Lookup(Llama)
	dir := filepath.Join(toolchainsDir(cache), spec.DirName())
	if inst.Dir != dir || inst.Python != filepath.Join(dir, "bin", "python") {
		t.Errorf("installed %+v", inst)
	}
	want := map[string]string{"torch": "2.11.0", "transformers": "4.57.6", "python": "3.11.9", "uv": "0.13.8"}
	for k, v := range want {
		if inst.Versions[k] != v {
			t.Errorf("version of %s = %q, want %q (all: %v)", k, inst.Versions[k], v, inst.Versions)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "requirements.lock")); err != nil || string(b) != spec.Lock {
		t.Errorf("the lock uv synced is not the spec's: %v", err)
	}
	lines := readLines(t, uvLog)
	uvCache := filepath.Join(cache, "uv")
	if len(lines) != 4 ||
		!strings.HasPrefix(lines[0], uvCache+" venv --allow-existing --relocatable --python 3.11 ") ||
		!strings.HasPrefix(lines[1], uvCache+" pip sync --require-hashes --python ") || !strings.HasSuffix(lines[1], "/requirements.lock") ||
		lines[2] != "python -c "+spec.SmokeImport ||
		!strings.HasPrefix(lines[3], uvCache+" pip freeze --python ") {
		t.Errorf("commands:\n%s", strings.Join(lines, "\n"))
	}
	for _, w := range []string{"llama: installing (log: ", "create Python 3.11 environment", "check that the packages load", "llama: installed in "} {
		if !strings.Contains(progress.String(), w) {
			t.Errorf("progress lacks %q:\n%s", w, progress.String())
		}
	}
	// Installed is installed: nothing runs the second time.
	progress.Reset()
	if _, err := Install(context.Background(), cache, Llama, &progress); err != nil {
		t.Fatal(err)
	}
	if n := len(readLines(t, uvLog)); n != 4 || !strings.Contains(progress.String(), "llama: already installed in "+dir) {
		t.Errorf("a second install ran %d commands: %s", n-4, progress.String())
	}
}

// An install whose packages do not load leaves nothing that resolves, and
// no temporary folder either.
func TestInstallThatFailsLeavesNothing(t *testing.T) {
	t.Setenv("UV_CACHE_DIR", t.TempDir())
	cache := t.TempDir()
	uvLog := fakeUV(t, cache, 1)
	_, err := Install(context.Background(), cache, Llama, nil)
	if err == nil || !strings.Contains(err.Error(), "install llama: the installed packages do not load") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Resolve(cache, Llama); err == nil {
		t.Error("a failed install resolves")
	}
	ents, _ := os.ReadDir(toolchainsDir(cache))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") || strings.HasPrefix(e.Name(), "llama-") {
			t.Errorf("left %s", e.Name())
		}
	}
	// A UV_CACHE_DIR of the user's own is kept.
	if l := readLines(t, uvLog)[0]; !strings.HasPrefix(l, os.Getenv("UV_CACHE_DIR")+" venv") {
		t.Errorf("uv ran with %q", l)
	}
}

// A toolchain whose prerequisite cannot be installed names the chain.
func TestInstallNamesTheMissingPrerequisite(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	t.Setenv("EDGEPIPE_PYPI_INDEX", "http://user:hunter2@"+strings.TrimPrefix(srv.URL, "http://")+"/simple")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Install(ctx, t.TempDir(), Llama, nil)
	if err == nil || !strings.Contains(err.Error(), "install llama: it needs uv: install uv: look up uv on http://127.0.0.1") ||
		!strings.Contains(err.Error(), "404 Not Found") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("err = %v", err)
	}
	if _, err := Install(ctx, t.TempDir(), "nope", nil); err == nil || !strings.Contains(err.Error(), `no toolchain named "nope"`) {
		t.Errorf("unknown toolchain: %v", err)
	}
}

// Ensure says, before each install, what it is, why the run needs it and
// roughly how big it is; with nothing missing it does nothing.
func TestEnsureAnnouncesEachInstall(t *testing.T) {
	t.Setenv("UV_CACHE_DIR", "")
	cache := t.TempDir()
	fakeUV(t, cache, 0)
	needs := Needed(cache, []string{ToolHFPPL}, nil)
	if len(needs) != 2 || !needs[0].Installed || needs[1].Installed {
		t.Fatalf("needs %+v", needs)
	}
	var out bytes.Buffer
	if err := Ensure(context.Background(), cache, needs, true, "", &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	if first != "installing toolchain llama (1 of 1): runs hf_perplexity.py; about 5 GB: PyTorch with its CUDA libraries" {
		t.Errorf("announced %q", first)
	}
	needs = Needed(cache, []string{ToolHFPPL}, nil)
	out.Reset()
	if err := Ensure(context.Background(), cache, needs, false, "fix", &out); err != nil || out.Len() != 0 {
		t.Errorf("nothing missing: %v, %q", err, out.String())
	}
}

func zipFile(t *testing.T, members map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range members {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "a.whl")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestZipMembers(t *testing.T) {
	whl := zipFile(t, map[string]string{"uv-0.13.8.data/scripts/uv": "#!bin", "pkg/data.part": "chunk"})
	dst := filepath.Join(t.TempDir(), "bin", "uv")
	if err := extractZipFile(whl, "uv-0.13.8.data/scripts/uv", dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dst); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("extracted %v, %v", st, err)
	}
	var buf bytes.Buffer
	buf.WriteString("head:")
	if err := appendZipMember(&buf, whl, "pkg/data.part"); err != nil || buf.String() != "head:chunk" {
		t.Errorf("appended %q, %v", buf.String(), err)
	}
	if err := appendZipMember(&buf, whl, "pkg/other"); err == nil || !strings.Contains(err.Error(), "has no pkg/other") {
		t.Errorf("missing member: %v", err)
	}
	notZip := filepath.Join(t.TempDir(), "x.whl")
	if err := os.WriteFile(notZip, []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := appendZipMember(&buf, notZip, "pkg/data.part"); err == nil || !strings.Contains(err.Error(), notZip) {
		t.Errorf("not a zip: %v", err)
	}
}

func TestSafeJoin(t *testing.T) {
	for rel, want := range map[string]string{
		"a/b.py":      "/dst/a/b.py",
		"./a/./b":     "/dst/a/b",
		"a/../b":      "/dst/b",
		"../x":        "",
		"a/../../x":   "",
		"/etc/passwd": "",
		`a\..\..\x`:   "",
		"":            "",
		".":           "",
	} {
		got, err := safeJoin("/dst", rel)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("safeJoin(%q) = %q, %v; want %q", rel, got, err, want)
		}
	}
}

func TestBuildJobs(t *testing.T) {
	t.Setenv("EDGEPIPE_BUILD_JOBS", "3")
	if buildJobs() != 3 {
		t.Errorf("jobs %d", buildJobs())
	}
	for _, v := range []string{"", "0", "-2", "many"} {
		t.Setenv("EDGEPIPE_BUILD_JOBS", v)
		if n := buildJobs(); n != runtime.NumCPU() {
			t.Errorf("EDGEPIPE_BUILD_JOBS=%q: %d jobs", v, n)
		}
	}
}

func TestUVEnvKeepsTheUsersCache(t *testing.T) {
	t.Setenv("UV_CACHE_DIR", "")
	if env := uvEnv("/c"); env[len(env)-1] != "UV_CACHE_DIR=/c/uv" {
		t.Errorf("env ends %q", env[len(env)-1])
	}
	t.Setenv("UV_CACHE_DIR", "/mine")
	for _, kv := range uvEnv("/c") {
		if kv == "UV_CACHE_DIR=/c/uv" {
			t.Error("the user's UV_CACHE_DIR was overridden")
		}
	}
}
