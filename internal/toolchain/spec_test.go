package toolchain

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
)

func TestLookupNamesWhatEdgepipeInstalls(t *testing.T) {
	_, err := Lookup("pytorch")
	if err == nil || !strings.Contains(err.Error(), `no toolchain named "pytorch": edgepipe installs uv, seaweedfs, llama, llamacpp`) {
		t.Fatalf("err = %v", err)
	}
	// cmake is a prerequisite, not something to install.
	if strings.Contains(err.Error(), "cmake") {
		t.Errorf("the list offers cmake: %v", err)
	}
}

func TestRegisterRefusesADuplicate(t *testing.T) {
	before := len(Specs())
	defer func() {
		if recover() == nil {
			t.Error("a second uv was registered")
		}
		if len(Specs()) != before {
			t.Error("the refused spec was kept")
		}
	}()
	Register(Spec{Name: UV, Kind: KindPython})
}

func TestSpecConstructors(t *testing.T) {
	locks := fstest.MapFS{"fam.lock": {Data: []byte("torch==2.11.0\n")}}
	p := Python("fam", locks, []string{"fam.py"}, "the family's tools").WithPackages("python", "torch").WithSmokeImport("import torch").
		WithExtraVersion(func(dir string) (string, string) { return "sdk", filepath.Base(dir) })
	if p.Kind != KindPython || p.Lock != "torch==2.11.0\n" || len(p.Needs) != 1 || p.Needs[0] != UV || p.SmokeImport != "import torch" ||
		strings.Join(p.Packages, " ") != "python torch" || p.Note != "the family's tools" || !p.Available() {
		t.Errorf("Python spec %+v", p)
	}
	if p.DirName() != "fam-"+p.Digest()[:16] {
		t.Errorf("DirName %s", p.DirName())
	}
	e := External("qnn", []string{"qnn-onnx-converter"}, "the QNN SDK")
	s := System("chromium", []string{"chromium"}, "apt-get install chromium")
	if e.Kind != KindExternal || e.FromPath || e.Available() || s.Kind != KindExternal || !s.FromPath || s.Available() {
		t.Errorf("external %+v, system %+v", e, s)
	}
	if IsSystem(Llama) || IsSystem("nope") {
		t.Error("llama is not from PATH")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a Python toolchain without its lock was made")
			}
		}()
		Python("nolock", locks, nil, "")
	}()
}

func TestPinsByPlatform(t *testing.T) {
	uv, _ := Lookup(UV)
	for _, tc := range []struct{ goos, goarch, want string }{
		{"linux", "amd64", "manylinux_2_17_x86_64"},
		{"linux", "arm64", "manylinux_2_17_aarch64"},
		{"darwin", "arm64", "macosx_11_0_arm64"},
		{"windows", "amd64", ""},
	} {
		p, ok := uv.pinFor(tc.goos, tc.goarch)
		if ok != (tc.want != "") || !strings.Contains(p.Filename, tc.want) {
			t.Errorf("%s/%s: %q, %v", tc.goos, tc.goarch, p.Filename, ok)
		}
	}
	weed, _ := Lookup(SeaweedFS)
	_, has := weed.pinFor(runtime.GOOS, runtime.GOARCH)
	if weed.Available() != has || weed.Available() != (runtime.GOOS == "linux" && runtime.GOARCH == "amd64") {
		t.Errorf("seaweedfs available %v on %s/%s", weed.Available(), runtime.GOOS, runtime.GOARCH)
	}
	// A pin for any platform matches every one.
	lc, _ := Lookup(LlamaCpp)
	if _, ok := lc.pinFor("plan9", "mips"); !ok {
		t.Error("the sdist pin does not match every platform")
	}
	// Folder names carry the release of a binary and of llama.cpp's build.
	if !strings.HasPrefix(uv.DirName(), "uv-0.13.8-") || !strings.HasPrefix(weed.DirName(), "seaweedfs-4.48-") {
		t.Errorf("binary folders %s, %s", uv.DirName(), weed.DirName())
	}
}

func TestSummaries(t *testing.T) {
	in := &Installed{Name: Llama, Versions: map[string]string{"python": "3.11.7", "torch": "2.11.0", "gguf": "0.17.1", "numpy": "2"}}
	if got := in.Summary(); got != "python 3.11.7, torch 2.11.0, gguf 0.17.1" {
		t.Errorf("Summary = %q", got)
	}
	if got := in.PinnedSummary(); got != "python 3.11, torch 2.11.0, gguf 0.17.1" {
		t.Errorf("PinnedSummary = %q", got)
	}
	if got := (&Installed{Name: Llama}).Summary(); got != Llama {
		t.Errorf("no versions: %q", got)
	}
	for in, want := range map[string]string{"3.11.7": "3.11", "3.11": "3.11", "3": "3", "3.11.7.post1": "3.11", "": ""} {
		if got := majorMinor(in); got != want {
			t.Errorf("majorMinor(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestToolRefusals(t *testing.T) {
	bin := &Installed{Name: UV, Tools: map[string]string{"uv": "/c/uv/bin/uv"}, LockDigest: "sha256:u", kind: KindBinary}
	if argv, id, err := bin.Tool("uv"); err != nil || len(argv) != 1 || argv[0] != "/c/uv/bin/uv" || id != "sha256:u" {
		t.Errorf("uv: %q %s %v", argv, id, err)
	}
	if _, _, err := bin.Tool("uvx"); err == nil || err.Error() != "toolchain uv has no tool uvx" {
		t.Errorf("unknown tool: %v", err)
	}
	if _, _, err := bin.Tool("not_registered.py"); err == nil || !strings.Contains(err.Error(), "toolchain uv: no helper script not_registered.py is registered") {
		t.Errorf("unregistered helper: %v", err)
	}
	noPython := &Installed{Name: LlamaCpp, Tools: map[string]string{ToolConvertHF: "/c/src/convert_hf_to_gguf.py"}, kind: KindLlamaCpp}
	if _, _, err := noPython.Tool(ToolConvertHF); err == nil || !strings.Contains(err.Error(), "run `edgepipe toolchain install llama`") {
		t.Errorf("no interpreter: %v", err)
	}
}

func TestFindToolRefusals(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	cache := t.TempDir()
	for tool, want := range map[string]string{
		ToolQuantize: "tool llama-quantize: toolchain llamacpp is not installed: run `edgepipe toolchain install llamacpp`",
		"cmake":      "cmake: needed to build llamacpp",
		"optimum":    "no edgepipe toolchain provides optimum: point the recipe's toolchains section or --tool-path at it",
	} {
		if _, _, _, _, err := FindTool(cache, tool); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("FindTool(%s) = %v, want %q", tool, err, want)
		}
	}
	// Finder is FindTool for the tool resolver.
	uv, _ := Lookup(UV)
	fakeInstall(t, cache, uv, map[string]string{"bin/uv": ""}, uv.Digest())
	argv, id, _, tc, err := Finder{CacheRoot: cache}.Lookup("uv")
	if err != nil || tc != UV || argv[0] != filepath.Join(toolchainsDir(cache), uv.DirName(), "bin", "uv") || id != "sha256:"+uv.Digest() {
		t.Errorf("Finder: %q %s %s %v", argv, id, tc, err)
	}
}

func TestReadMarker(t *testing.T) {
	dir := t.TempDir()
	if _, err := readMarker(dir); !os.IsNotExist(err) {
		t.Errorf("no marker: %v", err)
	}
	for body, want := range map[string]string{
		"{":               markerFile,
		`{"format": 2}`:   "marker format 2, want 1",
		`{"format": 1}`:   "",
		`{"format": "1"}`: markerFile,
	} {
		if err := os.WriteFile(filepath.Join(dir, markerFile), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readMarker(dir)
		if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
