package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

// usageCode is the exit code err asks for, and its text.
func usageCode(err error) (int, string) {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code, ee.Error()
	}
	if err == nil {
		return ExitOK, ""
	}
	return ExitStepFailed, err.Error()
}

func TestRecipeFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "recipe.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, boundedfile.RecipeLimit+1); err != nil {
		t.Fatal(err)
	}
	ok := writeRecipe(t, dir, "ok.yaml", twoTargets)
	for path, want := range map[string]string{
		filepath.Join(dir, "missing.yaml"): "does not exist: check the path (recipes/ holds the examples)",
		dir:                                "is a folder: name the recipe file in it (e.g. " + filepath.Join(dir, "demo.yaml") + ")",
		fifo:                               "is not a regular file: give a YAML file",
		big:                                "over the 4 MiB a recipe may be",
		ok:                                 "",
	} {
		code, msg := usageCode(recipeFile(path))
		if want == "" && code != ExitOK || want != "" && (code != ExitUsage || !strings.Contains(msg, want)) {
			t.Errorf("recipeFile(%s) = %d %q, want usage %q", filepath.Base(path), code, msg, want)
		}
	}
	// A recipe that is not a file never reaches the YAML reader (a FIFO
	// would block it).
	if code, msg := usageCode(func() error { _, err := loadPlan(fifo); return err }()); code != ExitUsage || !strings.Contains(msg, "not a regular file") {
		t.Errorf("loadPlan(fifo) = %d %q", code, msg)
	}
	if code, msg := usageCode(func() error { _, err := loadPlan(""); return err }()); code != ExitUsage || !strings.Contains(msg, "name a recipe file, e.g. edgepipe run recipes/demo.yaml") {
		t.Errorf("loadPlan(\"\") = %d %q", code, msg)
	}
}

// A target that cannot fit its device is refused when the recipe loads,
// before any step runs.
func TestLoadPlanRefusesWhatCannotFit(t *testing.T) {
	r := writeRecipe(t, t.TempDir(), "r.yaml", `edgepipe: 1
name: toobig
model: {source: builtin:smollm2-135m}
targets:
  tiny: {device: x86-laptop, format: gguf-q8_0, context: 100000000}
`)
	_, err := loadPlan(r)
	var diags recipe.Diagnostics
	if !errors.As(err, &diags) || !strings.Contains(err.Error(), "tiny") {
		t.Fatalf("loadPlan = %v, want the pre-flight's diagnostics", err)
	}
}

func TestCheckOutDir(t *testing.T) {
	root := t.TempDir()
	cache := filepath.Join(root, "cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A link to a folder inside the cache hides it by name only.
	if err := os.MkdirAll(filepath.Join(cache, "steps"), 0o755); err != nil {
		t.Fatal(err)
	}
	hidden := filepath.Join(root, "innocent")
	if err := os.Symlink(filepath.Join(cache, "steps"), hidden); err != nil {
		t.Fatal(err)
	}
	recipeDir := filepath.Join(root, "proj")
	rec := &recipe.Recipe{Model: recipe.Model{Source: "./model"}, Targets: []recipe.Target{{Name: "q4"}, {Name: "q8"}}}
	rec.Path = filepath.Join(recipeDir, "r.yaml")
	for _, tc := range []struct {
		name, out, cache, want string
	}{
		{"a folder of its own", filepath.Join(root, "artifacts"), cache, ""},
		{"the root", "/", cache, "--out / is the root of the file system"},
		{"a file", file, cache, "is a file: give a folder"},
		{"the cache", cache, cache, "is inside the cache folder"},
		{"inside the cache", filepath.Join(cache, "x", "y"), cache, "is inside the cache folder"},
		{"a link into the cache", filepath.Join(hidden, "out"), cache, "is inside the cache folder"},
		{"the cache in a target's folder", root, filepath.Join(root, "q8", "cache"), "where target q8 is published, and each publish replaces that folder"},
		{"the cache beside the targets", root, filepath.Join(root, "cache"), ""},
		{"inside the model's folder", filepath.Join(recipeDir, "model", "out"), cache, "is inside the model's source folder " + filepath.Join(recipeDir, "model")},
		{"the model's folder", filepath.Join(recipeDir, "model"), cache, "is inside the model's source folder"},
		{"beside the model", filepath.Join(recipeDir, "artifacts"), cache, ""},
	} {
		code, msg := usageCode(checkOutDir(tc.out, tc.cache, rec))
		if tc.want == "" && code != ExitOK || tc.want != "" && (code != ExitUsage || !strings.Contains(msg, tc.want)) {
			t.Errorf("%s: %d %q, want %q", tc.name, code, msg, tc.want)
		}
	}
	// A remote source has no folder to protect.
	remote := &recipe.Recipe{Model: recipe.Model{Source: "hf://org/name"}}
	remote.Path = filepath.Join(recipeDir, "r.yaml")
	if err := checkOutDir(filepath.Join(recipeDir, "org", "name"), cache, remote); err != nil {
		t.Errorf("remote source: %v", err)
	}
}

func TestCheckOutput(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	file := writeRecipe(t, dir, "report.xml", "old")
	for path, want := range map[string]string{
		"":                            "",
		file:                          "",
		filepath.Join(dir, "new.xml"): "",
		dir:                           "--junit: " + dir + " is a folder",
		fifo:                          "--junit: " + fifo + " is a named pipe (FIFO)",
	} {
		code, msg := usageCode(checkOutput("--junit", path))
		if want == "" && code != ExitOK || want != "" && (code != ExitUsage || !strings.Contains(msg, want)) {
			t.Errorf("checkOutput(%q) = %d %q, want %q", path, code, msg, want)
		}
	}
}

func TestWithinAndResolved(t *testing.T) {
	for _, tc := range []struct {
		path, dir string
		want      bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b/c", "/a/b", true},
		{"/a/bc", "/a/b", false},
		{"/a", "/a/b", false},
		{"/x/../a/b", "/a", true},
	} {
		if got := within(filepath.Clean(tc.path), tc.dir); got != tc.want {
			t.Errorf("within(%s, %s) = %v", tc.path, tc.dir, got)
		}
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	realDir, _ := filepath.EvalSymlinks(dir)
	for in, want := range map[string]string{
		filepath.Join(dir, "link"):                   filepath.Join(realDir, "real"),
		filepath.Join(dir, "link", "not", "yet"):     filepath.Join(realDir, "real", "not", "yet"),
		filepath.Join(dir, "link", "a", "..", "yet"): filepath.Join(realDir, "real", "yet"),
		"/no-such-root-folder/x":                     "/no-such-root-folder/x",
	} {
		if got := resolved(in); got != want {
			t.Errorf("resolved(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestCacheRoot(t *testing.T) {
	wd, _ := os.Getwd()
	env := &Env{Getenv: func(k string) string { return map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": ""}[k] }}
	for _, tc := range []struct {
		c    common
		env  *Env
		want string
	}{
		{common{cacheDir: "rel/cache"}, env, filepath.Join(wd, "rel", "cache")},
		{common{cacheDir: "/abs/cache"}, env, "/abs/cache"},
		{common{}, env, "/home/u/.cache/edgepipe"},
		{common{}, &Env{Getenv: func(k string) string { return map[string]string{"XDG_CACHE_HOME": "/xdg"}[k] }}, "/xdg/edgepipe"},
	} {
		if got, err := tc.c.cacheRoot(tc.env); err != nil || got != tc.want {
			t.Errorf("%+v: %s, %v; want %s", tc.c, got, err, tc.want)
		}
	}
	// EDGEPIPE_CACHE is --cache-dir's default.
	code, stdout, _ := runMain(t, map[string]string{"EDGEPIPE_CACHE": t.TempDir()}, "cache", "ls")
	if code != ExitOK || !strings.Contains(stdout, "0 entries") {
		t.Errorf("cache ls: %d %q", code, stdout)
	}
}
