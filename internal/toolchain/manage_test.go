package toolchain

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func human(n int64) string { return fmt.Sprintf("%dB", n) }

func setMtime(t *testing.T, path string, when time.Time) {
	t.Helper()
	if err := os.Chtimes(path, when, when); err != nil {
		t.Fatal(err)
	}
}

func TestMarkUsed(t *testing.T) {
	cache := t.TempDir()
	spec, _ := Lookup(UV)
	dir := fakeInstall(t, cache, spec, map[string]string{"bin/uv": ""}, spec.Digest())
	used := filepath.Join(dir, lastUsedFile)
	MarkUsed(cache, UV)
	if _, err := os.Stat(used); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	setMtime(t, used, old)
	MarkUsed(cache, UV)
	if st, err := os.Stat(used); err != nil || !st.ModTime().After(old.Add(time.Hour)) {
		t.Errorf("a second use left the time at %v (%v)", st.ModTime(), err)
	}
	// Nothing installed, nothing external, nothing unknown: no folder made.
	MarkUsed(cache, Llama)
	MarkUsed(cache, "cmake")
	MarkUsed(cache, "nope")
	ents, _ := os.ReadDir(toolchainsDir(cache))
	for _, e := range ents {
		if e.Name() != spec.DirName() {
			t.Errorf("MarkUsed made %s", e.Name())
		}
	}
}

// Folders lists every install folder with its size and last use, and
// says which the current locks name; the rest is what prune removes.
func TestFolders(t *testing.T) {
	cache := t.TempDir()
	if f, err := Folders(cache); err != nil || f != nil {
		t.Fatalf("no cache: %v, %v", f, err)
	}
	uv, _ := Lookup(UV)
	uvDir := fakeInstall(t, cache, uv, map[string]string{"bin/uv": "12345"}, uv.Digest())
	root := toolchainsDir(cache)
	// An install from an older lock: its marker names it.
	stale := filepath.Join(root, "llama-0000000000000000")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, markerFile), []byte(`{"format": 1, "name": "llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// An interrupted install: no marker, no name.
	broken := filepath.Join(root, ".tmp-llama-123")
	if err := os.MkdirAll(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".llama.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	helpers, err := MaterializeHelpers(cache)
	if err != nil {
		t.Fatal(err)
	}
	lastUse := time.Now().Add(-72 * time.Hour).Truncate(time.Second)
	if err := os.WriteFile(filepath.Join(uvDir, lastUsedFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	setMtime(t, filepath.Join(uvDir, lastUsedFile), lastUse)
	installed := time.Now().Add(-96 * time.Hour).Truncate(time.Second)
	setMtime(t, filepath.Join(stale, markerFile), installed)
	dirTime := time.Now().Add(-120 * time.Hour).Truncate(time.Second)
	setMtime(t, broken, dirTime)

	folders, err := Folders(cache)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Folder{}
	for _, f := range folders {
		got[filepath.Base(f.Dir)] = f
	}
	if len(folders) != 4 {
		t.Fatalf("folders %+v", folders)
	}
	for _, tc := range []struct {
		dir, name string
		current   bool
		lastUsed  time.Time
	}{
		{uv.DirName(), UV, true, lastUse},
		{"llama-0000000000000000", Llama, false, installed},
		{".tmp-llama-123", "", false, dirTime},
		{filepath.Base(helpers), "helpers", true, time.Time{}},
	} {
		f, ok := got[tc.dir]
		if !ok || f.Name != tc.name || f.Current != tc.current || !tc.lastUsed.IsZero() && !f.LastUsed.Equal(tc.lastUsed) {
			t.Errorf("%s: %+v, want name %q, current %v, last used %v", tc.dir, f, tc.name, tc.current, tc.lastUsed)
		}
	}
	if f := got[uv.DirName()]; f.Size != 5+int64(len(mustRead(t, filepath.Join(uvDir, markerFile)))) {
		t.Errorf("uv's size %d", f.Size)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRemove(t *testing.T) {
	cache := t.TempDir()
	uv, _ := Lookup(UV)
	dir := fakeInstall(t, cache, uv, map[string]string{"bin/uv": "12345"}, uv.Digest())
	for name, want := range map[string]string{
		"nope":  `no toolchain named "nope"`,
		"cmake": "cmake is not installed by edgepipe: needed to build llamacpp",
		Llama:   "toolchain llama is not installed (no " + filepath.Join(toolchainsDir(cache), "llama-"),
	} {
		if _, err := Remove(cache, name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Remove(%s) = %v, want %q", name, err, want)
		}
	}
	// An install in progress holds the lock: the removal waits for none.
	unlock, err := lockFile(context.Background(), filepath.Join(toolchainsDir(cache), ".uv.lock"), nil2())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Remove(cache, UV); err == nil || !strings.Contains(err.Error(), "another edgepipe is installing it; try again when it is done") {
		t.Errorf("removed under an install's lock: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the install went while locked: %v", err)
	}
	unlock()
	f, err := Remove(cache, UV)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != UV || f.Dir != dir || !f.Current || f.Size < 5 {
		t.Errorf("removed %+v", f)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there", dir)
	}
	// The helpers folder has no install lock to take.
	helpers := filepath.Join(t.TempDir(), "helpers-x")
	if err := os.Mkdir(helpers, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := RemoveFolder(t.TempDir(), Folder{Name: "helpers", Dir: helpers}); err != nil {
		t.Fatal(err)
	}
}

func TestDirSize(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{"x": 10, "a/y": 20, "a/b/z": 30} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A link is not what removing the folder frees.
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if n := DirSize(dir); n != 60 {
		t.Errorf("DirSize = %d, want 60", n)
	}
	if n := DirSize(filepath.Join(dir, "missing")); n != 0 {
		t.Errorf("missing folder: %d", n)
	}
}

func TestSizeHintAndWhy(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Kind: KindBinary}, "about 40 MB"},
		{Spec{Kind: KindLlamaCpp}, "about 150 MB, built from source with cmake in a few minutes"},
		{Spec{Kind: KindPython, Lock: "numpy==2\ntorch==2.11.0\n"}, "about 5 GB: PyTorch with its CUDA libraries"},
		{Spec{Kind: KindPython, Lock: "numpy==2\nlibtorch==1\n"}, "a Python environment"},
		{Spec{Kind: KindExternal}, ""},
	} {
		if got := sizeHint(tc.spec); got != tc.want {
			t.Errorf("sizeHint(%+v) = %q, want %q", tc.spec, got, tc.want)
		}
	}
	n := Need{Tools: []string{"a", "b"}, For: []string{"x"}}
	if got := n.Why(); got != "runs a, b; needed to install x" {
		t.Errorf("Why = %q", got)
	}
	if got := (Need{}).Why(); got != "" {
		t.Errorf("Why = %q", got)
	}
}

// Needed never asks to install what edgepipe cannot install, and knows
// what is installed already.
func TestNeededSkipsExternalAndSeesInstalls(t *testing.T) {
	cache := t.TempDir()
	uv, _ := Lookup(UV)
	fakeInstall(t, cache, uv, map[string]string{"bin/uv": ""}, uv.Digest())
	needs := Needed(cache, []string{"cmake", ToolPython, ToolGGUFToHF}, nil)
	var names []string
	for _, n := range needs {
		names = append(names, fmt.Sprintf("%s:%v:%s", n.Name, n.Installed, strings.Join(n.Tools, "+")))
	}
	if want := []string{"uv:true:", "llama:false:python+gguf_to_hf.py"}; !slices.Equal(names, want) {
		t.Errorf("needs %v, want %v", names, want)
	}
	if got := Missing(needs); len(got) != 1 || got[0].Name != Llama {
		t.Errorf("missing %+v", got)
	}
	if n := NeededNames(cache, "nope", "cmake"); len(n) != 0 {
		t.Errorf("NeededNames of unknown and external: %+v", n)
	}
}

func TestWriteList(t *testing.T) {
	cache := t.TempDir()
	var out bytes.Buffer
	if err := WriteList(&out, cache, human); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "LAST USED") {
		t.Errorf("header %q", lines[0])
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "0B in "+filepath.Join(cache, "toolchains")+" (each file once") {
		t.Errorf("total %q", last)
	}
	if !regexpLine(lines, `^uv\s+binary\s+no\s+-\s+-\s+-\s+uv$`) || !regexpLine(lines, `^cmake\s+external\s+\(not installed by edgepipe\)`) {
		t.Errorf("empty cache:\n%s", out.String())
	}

	uv, _ := Lookup(UV)
	uvDir := fakeInstall(t, cache, uv, map[string]string{"bin/uv": "12345"}, uv.Digest())
	stale := filepath.Join(toolchainsDir(cache), "llama-0000000000000000")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "f"), make([]byte, 7), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := WriteList(&out, cache, human); err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimSpace(out.String()), "\n")
	uvSize := DirSize(uvDir)
	if !regexpLine(lines, fmt.Sprintf(`^uv\s+binary\s+uv\s+%dB\s+%dB\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+uv$`, uvSize, uvSize)) ||
		!regexpLine(lines, `^llama-0000000000000000\s+stale\s+from another lock: `+"`toolchain prune`"+` removes it\s+7B\s+7B`) {
		t.Errorf("with installs:\n%s", out.String())
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, fmt.Sprintf("%dB in %s (", uvSize+7, filepath.Join(cache, "toolchains"))) {
		t.Errorf("total %q", last)
	}
}

// uv links the same wheel files into every environment: a file reached
// by several paths is counted once, within a folder and in the total, and
// a folder frees only what no path outside it reaches.
func TestMeasureDiskCountsHardLinksOnce(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{a, b, filepath.Join(a, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, n int) {
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(old, new string) {
		if err := os.Link(old, new); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(a, "wheel"), 1000)                         // shared with b
	link(filepath.Join(a, "wheel"), filepath.Join(b, "wheel"))     //
	write(filepath.Join(a, "own"), 100)                            // a's alone, two paths
	link(filepath.Join(a, "own"), filepath.Join(a, "sub", "own2")) //
	write(filepath.Join(b, "own"), 10)                             // b's alone
	u := MeasureDisk(a, b)
	if u.Bytes[a] != 1100 || u.Bytes[b] != 1010 || u.Own[a] != 100 || u.Own[b] != 10 || u.Total != 1110 {
		t.Errorf("bytes %v own %v total %d; want a 1100/100, b 1010/10, total 1110", u.Bytes, u.Own, u.Total)
	}
	if DirSize(a) != 1100 {
		t.Errorf("DirSize(a) = %d, want 1100: a file with two paths in a counts once", DirSize(a))
	}
}

// Doctor reports an installed toolchain's tools with their paths and
// version, and a converter whose interpreter is missing as not found.
func TestDoctorOfInstalledToolchains(t *testing.T) {
	cache := t.TempDir()
	lc, _ := Lookup(LlamaCpp)
	fakeInstall(t, cache, lc, map[string]string{
		"bin/llama-quantize": "", "bin/llama-perplexity": "", "bin/llama-imatrix": "", "bin/llama-bench": "", "bin/llama-tokenize": "", "src/convert_hf_to_gguf.py": "",
	}, lc.Digest())
	bin := t.TempDir()
	script := "#!/bin/sh\necho 'load_backend: loaded CPU backend' >&2\necho ''\necho 'cmake version 3.28.3'\necho 'CMake suite maintained by Kitware'\n"
	if err := os.WriteFile(filepath.Join(bin, "cmake"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	byName := map[string]ToolStatus{}
	for _, s := range Doctor(cache) {
		byName[s.Name] = s
	}
	q := byName[ToolQuantize]
	if !q.Found || q.Path != filepath.Join(toolchainsDir(cache), lc.DirName(), "bin", ToolQuantize) || q.Version == "" || q.InstallCommand != "" {
		t.Errorf("quantize %+v", q)
	}
	c := byName[ToolConvertHF]
	if c.Found || c.InstallCommand != "edgepipe toolchain install llama" || c.Note != "needs the llama toolchain's Python" {
		t.Errorf("converter %+v", c)
	}
	cm := byName["cmake"]
	if !cm.Found || cm.Path != filepath.Join(bin, "cmake") || cm.Version != "cmake version 3.28.3" || cm.Note != "" {
		t.Errorf("cmake %+v", cm)
	}
	// A provisioned built-in model is found where it is.
	root, _, err := builtinRoot(cache, "smollm2-135m")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "hf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, markerFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, s := range Doctor(cache) {
		if s.Name == "builtin:smollm2-135m" && (!s.Found || s.Path != filepath.Join(root, "hf") || !strings.Contains(s.Version, "SmolLM2-135M-Instruct") || s.InstallCommand != "") {
			t.Errorf("built-in model %+v", s)
		}
	}
}

func TestForRecipe(t *testing.T) {
	st := []ToolStatus{
		{Name: "uv", Toolchain: UV, InstallCommand: "edgepipe toolchain install uv"},
		{Name: ToolPython, Toolchain: Llama, InstallCommand: "x"},
		{Name: ToolHFPPL, Toolchain: Llama, InstallCommand: "x"},
		{Name: ToolQuantize, Toolchain: LlamaCpp, InstallCommand: "x"},
		{Name: "mlc_llm", Toolchain: "mlc", Note: "install mlc-llm yourself"},
		{Name: "qnn-onnx-converter", Toolchain: "qnn", Note: "the QNN SDK"},
		{Name: "cmake", Toolchain: "cmake", Note: "apt-get install cmake"},
	}
	needs := []Need{{Name: UV}, {Name: Llama, Tools: []string{ToolHFPPL}}}
	local := func(tool string) bool { return tool == "qnn-onnx-converter" }
	got := ForRecipe(slices.Clone(st), needs, []string{ToolHFPPL, "mlc_llm", "qnn-onnx-converter"}, local)
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	// uv: needed whole; hf_perplexity.py: the tool llama is needed for;
	// mlc_llm: run by the recipe, not installable; the QNN converter is
	// found through the recipe.
	if want := []string{"uv", ToolHFPPL, "mlc_llm"}; !slices.Equal(names, want) {
		t.Errorf("kept %v, want %v", names, want)
	}
}

func TestWriteDoctor(t *testing.T) {
	var out bytes.Buffer
	WriteDoctor(&out, []ToolStatus{
		{Name: "uv", Toolchain: "uv", Found: true, Version: "uv 0.13.8", Path: "/c/uv"},
		{Name: "python", Toolchain: "llama", InstallCommand: "edgepipe toolchain install llama", Note: "toolchain llama is not installed: run `edgepipe toolchain install llama`"},
		{Name: "gguf_to_hf.py", Toolchain: "llamacpp", InstallCommand: "edgepipe toolchain install llama", Note: "needs the llama toolchain's Python"},
		{Name: "mlc_llm", Toolchain: "mlc", Note: "install mlc-llm yourself"},
	})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for i, re := range []string{
		`^TOOL\s+TOOLCHAIN\s+FOUND\s+VERSION\s+PATH / HOW TO INSTALL$`,
		`^uv\s+uv\s+yes\s+uv 0\.13\.8\s+/c/uv$`,
		// The note repeats the command: shown once.
		`^python\s+llama\s+no\s+edgepipe toolchain install llama$`,
		`^gguf_to_hf\.py\s+llamacpp\s+no\s+edgepipe toolchain install llama  \(needs the llama toolchain's Python\)$`,
		`^mlc_llm\s+mlc\s+no\s+install mlc-llm yourself$`,
	} {
		if i >= len(lines) || !regexpLine(lines[i:i+1], re) {
			t.Errorf("line %d does not match %s:\n%s", i, re, out.String())
		}
	}
}

// regexpLine reports whether one of lines matches re.
func regexpLine(lines []string, re string) bool {
	r := regexp.MustCompile(re)
	return slices.ContainsFunc(lines, r.MatchString)
}
