package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/lockfile"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/internal/tools"
	_ "github.com/edgepipe/edgepipe/pipelines" // the families plan.Expand needs
)

// toolchains answers every tool lookup without an install: a tool named
// in from comes from that toolchain, any other from the system package
// "browser" (whose versions the lock holds itself); missing ones fail.
type toolchains struct {
	from    map[string]string
	missing map[string]bool
}

func (f toolchains) Lookup(tool string) ([]string, string, string, string, error) {
	if f.missing[tool] {
		return nil, "", "", "", fmt.Errorf("tool %s is not installed: run `edgepipe toolchain install`", tool)
	}
	tc := f.from[tool]
	if tc == "" {
		tc = "browser"
	}
	return []string{"/opt/" + tool}, "sha256:id-of-" + tool, tool + " 1.0", tc, nil
}

// run is a recipe on disk with a local model folder, expanded, with an
// engine that resolves it against a fresh cache.
type run struct {
	recipe string // the recipe file
	model  string // its model folder
	cache  string
	pl     *plan.Plan
	eng    *engine.Engine
	tc     toolchains
	// dataErr, when set, is what resolving a data file fails with.
	dataErr error
}

const recipeText = `edgepipe: 1
name: lockme
model: {source: ./model}
targets:
  a: {device: x86-laptop, format: gguf-q4_k_m}
  b: {device: x86-laptop, format: gguf-q8_0}
`

func newRun(t *testing.T, tc toolchains) *run {
	t.Helper()
	dir := t.TempDir()
	r := &run{recipe: filepath.Join(dir, "lockme.yaml"), model: filepath.Join(dir, "model"), cache: filepath.Join(dir, "cache"), tc: tc}
	for name, body := range map[string]string{"config.json": `{"model_type": "llama"}`, "model.safetensors": "weights"} {
		if err := os.MkdirAll(r.model, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r.model, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(r.recipe, []byte(recipeText), 0o644); err != nil {
		t.Fatal(err)
	}
	r.reload(t)
	return r
}

// reload expands the recipe and makes a new engine, as a new run does.
func (r *run) reload(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(r.recipe)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recipe.LoadBytes(r.recipe, data, plan.Catalog{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.pl, err = plan.Expand(rec); err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(r.cache)
	if err != nil {
		t.Fatal(err)
	}
	evalFile := filepath.Join(filepath.Dir(r.recipe), "eval.txt")
	if err := os.WriteFile(evalFile, []byte("some evaluation text"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.eng = engine.NewEngine(r.pl, engine.Options{Cache: c, Tools: &tools.Resolver{Toolchains: r.tc},
		Data: func(string) (string, error) { return evalFile, r.dataErr }})
}

// check opens the lock as a run with these flags does and checks it.
func (r *run) check(t *testing.T, locked, update bool) (Outcome, error) {
	t.Helper()
	st, err := Open(r.recipe, r.pl, locked, update)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return st.Check(context.Background(), r.eng, r.pl, r.cache, "1.2.3")
}

func (r *run) lock(t *testing.T) *lockfile.Lock {
	t.Helper()
	l, err := lockfile.Read(lockfile.PathFor(r.recipe))
	if err != nil || l == nil {
		t.Fatalf("the lock: %v, %v", l, err)
	}
	return l
}

// What the lock holds: the source's files, the data, each tool once with
// its origin and identity, the version of a system package's tool, and no
// toolchain entry for it.
func TestResolve(t *testing.T) {
	r := newRun(t, toolchains{})
	l, err := Resolve(context.Background(), r.eng, r.pl, r.cache, "1.2.3", false)
	if err != nil {
		t.Fatal(err)
	}
	if l.LockVersion != lockfile.Version || l.EdgepipeVersion != "1.2.3" || l.Platform != runtime.GOOS+"/"+runtime.GOARCH || l.Source.URI != "./model" {
		t.Errorf("header %+v", l)
	}
	var files []string
	for _, f := range l.Source.Files {
		files = append(files, f.Path)
		if len(f.SHA256) != 64 || f.Size == 0 {
			t.Errorf("file %+v", f)
		}
	}
	sort.Strings(files)
	if !reflect.DeepEqual(files, []string{"config.json", "model.safetensors"}) {
		t.Errorf("source files %v", files)
	}
	if len(l.Data) == 0 {
		t.Error("no data files: the perplexity steps read one")
	}
	for ref, sum := range l.Data {
		if len(sum) != 64 {
			t.Errorf("data %s: %q", ref, sum)
		}
	}
	for _, want := range []string{"llama-quantize", "llama-perplexity"} {
		tl, ok := l.Tools[want]
		if !ok || tl.From != "toolchain browser" || tl.Identity != "sha256:id-of-"+want || tl.Version != want+" 1.0" {
			t.Errorf("tool %s: %+v", want, tl)
		}
	}
	if l.Toolchains != nil {
		t.Errorf("toolchains %v: a system package has no lock of its own", l.Toolchains)
	}
}

// installUV makes the uv toolchain look installed in the cache, so a tool
// from it locks the toolchain's digest and versions.
func installUV(t *testing.T, cacheDir string) toolchain.Spec {
	t.Helper()
	spec, err := toolchain.Lookup(toolchain.UV)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cacheDir, "toolchains", spec.DirName())
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "uv"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	marker, _ := json.Marshal(map[string]any{"format": 1, "name": spec.Name, "kind": spec.Kind, "lock_digest": spec.Digest(),
		"versions": map[string]string{"uv": "0.9.9"}})
	if err := os.WriteFile(filepath.Join(dir, ".complete"), marker, 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

// A tool from an edgepipe toolchain is locked by the toolchain's digest
// and pinned versions, once for all its tools; the tool itself holds no
// version.
func TestResolveToolchain(t *testing.T) {
	r := newRun(t, toolchains{from: map[string]string{"llama-quantize": toolchain.UV, "llama-perplexity": toolchain.UV}})
	spec := installUV(t, r.cache)
	l, err := Resolve(context.Background(), r.eng, r.pl, r.cache, "v", false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]lockfile.Toolchain{toolchain.UV: {LockDigest: "sha256:" + spec.Digest(), Versions: "uv 0.9.9"}}
	if !reflect.DeepEqual(l.Toolchains, want) {
		t.Errorf("toolchains %+v, want %+v", l.Toolchains, want)
	}
	if tl := l.Tools["llama-quantize"]; tl.From != "toolchain uv" || tl.Version != "" {
		t.Errorf("llama-quantize %+v: want its toolchain and no version of its own", tl)
	}

	// A toolchain the lookup names but that is not installed is an error.
	r2 := newRun(t, toolchains{from: map[string]string{"llama-quantize": toolchain.UV}})
	if _, err := Resolve(context.Background(), r2.eng, r2.pl, r2.cache, "v", false); err == nil || !strings.Contains(err.Error(), "edgepipe toolchain install uv") {
		t.Errorf("err = %v, want the install command", err)
	}
}

// How a run treats its lock, flag by flag, across runs.
func TestCheckAcrossRuns(t *testing.T) {
	r := newRun(t, toolchains{})
	path := lockfile.PathFor(r.recipe)

	out, err := r.check(t, false, false)
	if err != nil || out.Status != "written" || out.Changes != nil {
		t.Fatalf("first run: %+v, %v; want the lock written", out, err)
	}
	first := r.lock(t)
	if first.EdgepipeVersion != "1.2.3" || len(first.Tools) == 0 {
		t.Errorf("written lock %+v", first)
	}

	for _, flags := range []struct{ locked bool }{{false}, {true}} {
		out, err = r.check(t, flags.locked, false)
		if err != nil || out.Status != "matches" {
			t.Errorf("unchanged, --locked=%v: %+v, %v; want matches", flags.locked, out, err)
		}
	}

	// The model changes: reported, and the lock left alone; --locked fails.
	if err := os.WriteFile(filepath.Join(r.model, "model.safetensors"), []byte("other weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.reload(t)
	before, _ := os.ReadFile(path)
	out, err = r.check(t, false, false)
	if err != nil || out.Status != "differs" || out.Mismatch == nil || len(out.Changes) != 1 ||
		out.Changes[0].Field != "source.files[model.safetensors]" {
		t.Fatalf("changed model: %+v, %v; want one change of model.safetensors", out, err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("a run without --update-lock rewrote the lock")
	}
	out, err = r.check(t, true, false)
	var mismatch *lockfile.MismatchError
	if !errors.As(err, &mismatch) || out.Status != "differs" || mismatch != out.Mismatch {
		t.Errorf("--locked with a changed model: %+v, %v; want the mismatch as the error", out, err)
	}
	if err != nil && (!strings.Contains(err.Error(), "model.safetensors") || !strings.Contains(err.Error(), "--update-lock")) {
		t.Errorf("the mismatch does not say what changed and how to accept it: %v", err)
	}

	// --update-lock rewrites it with the change; again, nothing to change.
	out, err = r.check(t, false, true)
	if err != nil || out.Status != "updated" || len(out.Changes) != 1 {
		t.Fatalf("--update-lock: %+v, %v", out, err)
	}
	if l := r.lock(t); reflect.DeepEqual(l.Source.Files, first.Source.Files) {
		t.Error("--update-lock did not write the new source files")
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	out, err = r.check(t, false, true)
	if err != nil || out.Status != "unchanged" || len(out.Changes) != 0 {
		t.Errorf("--update-lock again: %+v, %v; want unchanged", out, err)
	}
	if fi, _ := os.Stat(path); !fi.ModTime().Equal(old) {
		t.Error("an unchanged lock was rewritten")
	}
}

// --locked without a lock fails before anything resolves, naming the
// command that writes one.
func TestCheckLockedWithoutALock(t *testing.T) {
	r := newRun(t, toolchains{missing: map[string]bool{"llama-quantize": true}})
	out, err := r.check(t, true, false)
	var me *MissingError
	if !errors.As(err, &me) || out.Status != "missing" {
		t.Fatalf("%+v, %v; want a MissingError", out, err)
	}
	want := fmt.Sprintf("--locked, but %s has no lock (%s.lock does not exist): run `edgepipe lock %s` and commit the lock", r.recipe, r.recipe, r.recipe)
	if err.Error() != want {
		t.Errorf("error\n%s\nwant\n%s", err, want)
	}
}

// A lock made on another platform is not compared tool by tool; --locked
// still compares, and the platform is among the changes.
func TestCheckOtherPlatform(t *testing.T) {
	r := newRun(t, toolchains{})
	if _, err := r.check(t, false, false); err != nil {
		t.Fatal(err)
	}
	l := r.lock(t)
	l.Platform = "plan9/mips"
	if err := lockfile.Write(lockfile.PathFor(r.recipe), l); err != nil {
		t.Fatal(err)
	}
	out, err := r.check(t, false, false)
	want := fmt.Sprintf("it was made on plan9/mips, this is %s/%s (a lock holds one platform's tool builds)", runtime.GOOS, runtime.GOARCH)
	if err != nil || out.Status != "unchecked" || out.Detail != want {
		t.Errorf("%+v, %v; want unchecked: %s", out, err, want)
	}
	out, err = r.check(t, true, false)
	if err == nil || out.Status != "differs" || !strings.Contains(err.Error(), "The lock was made on plan9/mips") {
		t.Errorf("--locked: %+v, %v", out, err)
	}
}

// A run of some targets compares the entries it uses and never writes a
// lock from its partial view.
func TestCheckPartial(t *testing.T) {
	r := newRun(t, toolchains{})
	st, err := Open(r.recipe, r.pl, false, false)
	if err != nil {
		t.Fatal(err)
	}
	st.Partial = true
	out, err := st.Check(context.Background(), r.eng, r.pl, r.cache, "v")
	if err != nil || out.Status != "unchecked" || !strings.Contains(out.Detail, "`edgepipe lock` resolves the whole recipe") {
		t.Errorf("%+v, %v", out, err)
	}
	if _, err := os.Stat(lockfile.PathFor(r.recipe)); !os.IsNotExist(err) {
		t.Errorf("a partial run wrote the lock (%v)", err)
	}

	// With a lock holding entries this selection does not use.
	if _, err := r.check(t, false, false); err != nil {
		t.Fatal(err)
	}
	l := r.lock(t)
	l.Tools["other-target-tool"] = lockfile.Tool{From: "tool-path", Identity: "sha256:x", Version: "9"}
	if err := lockfile.Write(lockfile.PathFor(r.recipe), l); err != nil {
		t.Fatal(err)
	}
	for _, partial := range []bool{true, false} {
		st, err := Open(r.recipe, r.pl, true, false)
		if err != nil {
			t.Fatal(err)
		}
		st.Partial = partial
		out, err := st.Check(context.Background(), r.eng, r.pl, r.cache, "1.2.3")
		if partial && (err != nil || out.Status != "matches") {
			t.Errorf("partial: %+v, %v; want matches on the entries it uses", out, err)
		}
		if !partial && (err == nil || out.Status != "differs") {
			t.Errorf("whole: %+v, %v; want the extra tool to differ", out, err)
		}
	}
}

// A run whose inputs do not resolve (a tool is missing) goes on without a
// lock check, and writes no lock; --locked fails, but not as a mismatch.
func TestCheckUnresolved(t *testing.T) {
	r := newRun(t, toolchains{missing: map[string]bool{"llama-perplexity": true}})
	out, err := r.check(t, false, false)
	if err != nil || out.Status != "unchecked" || !strings.Contains(out.Detail, "llama-perplexity is not installed") {
		t.Errorf("%+v, %v", out, err)
	}
	if _, err := os.Stat(lockfile.PathFor(r.recipe)); !os.IsNotExist(err) {
		t.Error("a lock was written from a failed resolution")
	}

	good := newRun(t, toolchains{})
	if _, err := good.check(t, false, false); err != nil {
		t.Fatal(err)
	}
	good.tc.missing = map[string]bool{"llama-perplexity": true}
	good.reload(t)
	out, err = good.check(t, true, false)
	var mismatch *lockfile.MismatchError
	if err == nil || errors.As(err, &mismatch) || !strings.HasPrefix(err.Error(), "--locked: cannot check "+lockfile.PathFor(good.recipe)+": ") {
		t.Errorf("--locked: %+v, %v; want a resolution error, not a mismatch", out, err)
	}

	// Interrupted while resolving: the interruption, whatever the flags.
	good.tc.missing = nil
	good.dataErr = fmt.Errorf("download builtin:eval: %w", context.Canceled)
	good.reload(t)
	for _, locked := range []bool{false, true} {
		out, err := good.check(t, locked, false)
		if !engine.IsInterrupted(err) || strings.HasPrefix(err.Error(), "--locked") || out.Status != "" {
			t.Errorf("interrupted, --locked=%v: %+v, %v; want the interruption itself", locked, out, err)
		}
	}
}

// A lock that cannot be written: a run that was not asked for one goes on;
// --update-lock fails.
func TestCheckWriteFails(t *testing.T) {
	r := newRun(t, toolchains{})
	// A folder where the lock goes: the rename over it fails.
	if err := os.Mkdir(lockfile.PathFor(r.recipe), 0o755); err != nil {
		t.Fatal(err)
	}
	st := &State{Path: lockfile.PathFor(r.recipe), Recipe: r.recipe}
	out, err := st.Check(context.Background(), r.eng, r.pl, r.cache, "v")
	if err != nil || out.Status != "unchecked" || !strings.Contains(out.Detail, "write "+st.Path) {
		t.Errorf("default: %+v, %v", out, err)
	}
	st.Update = true
	if _, err := st.Check(context.Background(), r.eng, r.pl, r.cache, "v"); err == nil {
		t.Error("--update-lock: no error")
	}
}

func TestOpen(t *testing.T) {
	r := newRun(t, toolchains{})
	if _, err := Open(r.recipe, r.pl, true, true); !errors.Is(err, ErrContradiction) {
		t.Errorf("--locked --update-lock: %v", err)
	}
	st, err := Open(r.recipe, r.pl, false, false)
	if err != nil || st.Have != nil || st.Path != r.recipe+".lock" || st.Recipe != r.recipe || st.Pinned != "" {
		t.Errorf("no lock: %+v, %v", st, err)
	}

	if err := os.WriteFile(lockfile.PathFor(r.recipe), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		locked, update bool
		wantErr        bool
		suffix         string
	}{
		{false, false, true, " (or pass --update-lock to replace it)"},
		{true, false, true, "run `edgepipe lock` to write it again"},
		{false, true, false, ""}, // --update-lock replaces it
	} {
		st, err := Open(r.recipe, r.pl, tc.locked, tc.update)
		var ue *UnreadableError
		switch {
		case tc.wantErr && (!errors.As(err, &ue) || !strings.HasSuffix(err.Error(), tc.suffix) || errors.Unwrap(err) == nil):
			t.Errorf("locked %v update %v: %v; want an UnreadableError ending %q", tc.locked, tc.update, err, tc.suffix)
		case !tc.wantErr && (err != nil || st.Have != nil):
			t.Errorf("locked %v update %v: %+v, %v", tc.locked, tc.update, st, err)
		}
	}
}

// A lock pins a moving source to the commit it resolved to, unless the
// lock is being updated or is another source's.
func TestOpenPins(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	r := newRun(t, toolchains{})
	for _, tc := range []struct {
		name, lockURI, revision string
		update                  bool
		want                    string
	}{
		{"pinned", "hf://org/model@main", commit, false, "hf://org/model@" + commit},
		{"updating", "hf://org/model@main", commit, true, "hf://org/model@main"},
		{"another source", "hf://org/other@main", commit, false, "hf://org/model@main"},
		{"no revision", "hf://org/model@main", "", false, "hf://org/model@main"},
		{"not a commit", "hf://org/model@main", "v1.0", false, "hf://org/model@main"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(recipeText, "./model", "hf://org/model@main", 1)
			rec, err := recipe.LoadBytes(r.recipe, []byte(src), plan.Catalog{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			pl, err := plan.Expand(rec)
			if err != nil {
				t.Fatal(err)
			}
			l := &lockfile.Lock{LockVersion: lockfile.Version, EdgepipeVersion: "v", Platform: "linux/amd64",
				Source: lockfile.Source{URI: tc.lockURI, Revision: tc.revision, Files: []lockfile.File{}}}
			if err := lockfile.Write(lockfile.PathFor(r.recipe), l); err != nil {
				t.Fatal(err)
			}
			st, err := Open(r.recipe, pl, false, tc.update)
			if err != nil {
				t.Fatal(err)
			}
			if got := pl.Source(); got != tc.want {
				t.Errorf("source %q, want %q", got, tc.want)
			}
			wantPinned := ""
			if tc.want != "hf://org/model@main" {
				wantPinned = commit
			}
			if st.Pinned != wantPinned || st.Have == nil {
				t.Errorf("pinned %q (lock %v), want %q", st.Pinned, st.Have != nil, wantPinned)
			}
		})
	}
}
