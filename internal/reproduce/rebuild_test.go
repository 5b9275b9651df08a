package reproduce

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/tools"
	_ "github.com/edgepipe/edgepipe/pipelines" // the families plan.Expand needs
	"github.com/edgepipe/edgepipe/steps"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it); got:\n%s\n--- want:\n%s", path, got, want)
	}
}

// What `edgepipe reproduce` prints for a folder that reproduced, one
// that did not (every kind of difference), and one whose gate moved
// although its files did not.
func TestPrintGolden(t *testing.T) {
	reports := []Report{
		{Dir: "out/laptop", Target: "laptop", Format: "gguf-q4_k_m", Identical: true,
			Files: []File{{Path: "logs/q.log", Status: Log}, {Path: "logs/p.log", Status: Log}, {Path: "model.gguf", Status: Identical}},
			Steps: []Step{{ID: "gguf-quantize:q4_k_m", Status: Identical}, {ID: "perplexity:q4_k_m", Status: OriginalGone}}},
		{Dir: "out/phone", Target: "phone", Format: "gguf-q8_0",
			Files: []File{
				{Path: "model.gguf", Status: Differs, Published: sha("2")[:12], Rebuilt: sha("9")[:12]},
				{Path: "tokenizer.json", Status: Tampered, OnDisk: "sha256 differs from the manifest's"},
				{Path: "extra.bin", Status: Extra},
				{Path: "weights.bin", Status: Missing},
			},
			SourceDiffers: []string{"config.json", "model.safetensors"},
			Perplexity:    &Perplexity{Published: 24.5, Rebuilt: 24.75, Delta: 0.25, Baseline: 24, RebuiltBaseline: 24},
			Steps: []Step{
				{ID: "gguf-convert:f16", Status: Identical},
				{ID: "gguf-quantize:q8_0", Status: Differs, Files: []string{"model.gguf", "imatrix.dat"}, Argv: `command 1, argument 3: "Q8_0" then, "Q4_0" now`},
				{ID: "perplexity:q8_0", Status: NotRebuilt},
			}},
		{Dir: "out/moved", Target: "moved", Format: "gguf-q8_0", Identical: true,
			Files:      []File{{Path: "model.gguf", Status: Identical}},
			Perplexity: &Perplexity{Published: 24.5, Rebuilt: 24.5, Baseline: 24, RebuiltBaseline: 24.1}},
	}
	var b bytes.Buffer
	Print(&b, reports)
	golden(t, "print.golden.txt", b.Bytes())
	if n := CountDiffering(reports); n != 1 {
		t.Errorf("CountDiffering = %d, want 1", n)
	}
}

func TestScratchFolder(t *testing.T) {
	dir, cleanup, err := ScratchFolder("", false)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(dir) || !strings.Contains(filepath.Base(dir), "edgepipe-reproduce-") {
		t.Errorf("scratch %s", dir)
	}
	cleanup()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s", dir)
	}

	named := filepath.Join(t.TempDir(), "new", "scratch")
	dir, cleanup, err = ScratchFolder(named, true)
	if err != nil || dir != named {
		t.Fatalf("%s, %v", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "leftover"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cleanup() // --keep-scratch
	if _, err := os.Stat(filepath.Join(dir, "leftover")); err != nil {
		t.Errorf("a kept scratch folder was removed: %v", err)
	}

	// Not empty: refused, and left as it was.
	_, _, err = ScratchFolder(named, false)
	var re *RefusedError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "--scratch "+named+" is not empty") {
		t.Errorf("err = %v, want a refusal naming the folder", err)
	}
	if _, err := os.Stat(filepath.Join(named, "leftover")); err != nil {
		t.Errorf("a refused scratch folder was touched: %v", err)
	}
}

func TestRecipeOf(t *testing.T) {
	dir := t.TempDir()
	recipePath := filepath.Join(dir, "r.yaml")
	body := []byte("edgepipe: 1\n")
	if err := os.WriteFile(recipePath, body, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256Hex(body)
	pub := func(path, sha string) *manifest.Manifest {
		return &manifest.Manifest{Recipe: manifest.Recipe{Path: path, SHA256: sha}}
	}
	dirs := []string{"out/a", "out/b"}
	for _, tc := range []struct {
		name     string
		pubs     []*manifest.Manifest
		override string
		want     string // the path, or a part of the refusal
	}{
		{"recorded path", []*manifest.Manifest{pub(recipePath, sum), pub(recipePath, sum)}, "", recipePath},
		{"--recipe", []*manifest.Manifest{pub("elsewhere.yaml", sum)}, recipePath, recipePath},
		{"two recipes", []*manifest.Manifest{pub(recipePath, sum), pub(recipePath, sha("f"))}, "",
			"out/a and out/b were made from different recipes"},
		{"no path", []*manifest.Manifest{pub("", sum)}, "", "does not record the recipe's path: name the recipe with --recipe FILE"},
		{"gone", []*manifest.Manifest{pub(filepath.Join(dir, "gone.yaml"), sum)}, "", "run reproduce from the folder the original run started in"},
		{"--recipe gone", []*manifest.Manifest{pub(recipePath, sum)}, filepath.Join(dir, "gone.yaml"), "is not there"},
		{"no sha256", []*manifest.Manifest{pub(recipePath, "")}, "", "does not record the recipe's sha256"},
		{"changed", []*manifest.Manifest{pub(recipePath, sha("e"))}, "", "changed since out/a was made (sha256 " + sum + " now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RecipeOf(dirs[:len(tc.pubs)], tc.pubs, tc.override)
			if filepath.IsAbs(tc.want) {
				if err != nil || got != tc.want {
					t.Errorf("%q, %v; want %s", got, err, tc.want)
				}
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want a refusal with %q", err, tc.want)
			}
			if tc.name == "--recipe gone" && !strings.HasSuffix(err.Error(), "check the path") {
				t.Errorf("err = %v, want it to end with the fix for --recipe", err)
			}
		})
	}
}

func loadPlan(t *testing.T, src string) *plan.Plan {
	t.Helper()
	r, err := recipe.LoadBytes(filepath.Join(t.TempDir(), "r.yaml"), []byte(src), plan.Catalog{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Expand(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const twoTargets = `edgepipe: 1
name: r
model: {source: "hf://org/model@main"}
targets:
  a: {device: x86-laptop, format: gguf-q4_k_m}
  b: {device: x86-laptop, format: gguf-q8_0}
`

func TestPinRecordedSource(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	pl := loadPlan(t, twoTargets)
	if notes := pinRecordedSource(pl, &manifest.Manifest{}); notes != nil || pl.Source() != "hf://org/model@main" {
		t.Errorf("no revision: %v, source %s", notes, pl.Source())
	}
	notes := pinRecordedSource(pl, &manifest.Manifest{Source: manifest.Source{ResolvedRevision: commit}})
	if pl.Source() != "hf://org/model@"+commit || !reflect.DeepEqual(notes, []string{"source pinned to the recorded commit " + commit}) {
		t.Errorf("pinned: %v, source %s", notes, pl.Source())
	}
	local := loadPlan(t, strings.Replace(twoTargets, "hf://org/model@main", "./model", 1))
	notes = pinRecordedSource(local, &manifest.Manifest{Source: manifest.Source{ResolvedRevision: commit}})
	if local.Source() != "./model" || len(notes) != 1 || !strings.Contains(notes[0], "./model cannot be pinned to it") {
		t.Errorf("local: %v, source %s", notes, local.Source())
	}
}

// A target's closure is its publish step and everything it needs, in
// plan order; the other target's own steps are not in it.
func TestClosure(t *testing.T) {
	pl := loadPlan(t, twoTargets)
	got := closure(pl, []string{"a"})
	want := []string{"source", "gguf-convert:f16", "perplexity:baseline", "gguf-quantize:q4_k_m", "hf-perplexity:baseline",
		"compare-perplexity:f16", "perplexity:q4_k_m", "contract:gguf-quantize:q4_k_m", "publish:a"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("closure(a) = %v\nwant %v", got, want)
	}
	if both := closure(pl, []string{"b", "a"}); len(both) != len(pl.Steps) {
		t.Errorf("closure(a, b) has %d steps, the plan %d", len(both), len(pl.Steps))
	}
	if !hasTarget(pl, "a", "gguf-q4_k_m") || hasTarget(pl, "a", "gguf-q8_0") || hasTarget(pl, "c", "gguf-q4_k_m") {
		t.Error("hasTarget must match both the name and the format")
	}
}

// The scratch cache links the user's toolchains and downloads, and
// nothing else of it.
func TestScratchCache(t *testing.T) {
	user := t.TempDir()
	for _, d := range []string{"toolchains", "downloads", "objects", "entries"} {
		if err := os.MkdirAll(filepath.Join(user, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(t.TempDir(), "cache")
	ca, err := scratchCache(root, user)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Root() != root {
		t.Errorf("root %s", ca.Root())
	}
	for _, d := range []string{"toolchains", "downloads"} {
		if to, err := os.Readlink(filepath.Join(root, d)); err != nil || to != filepath.Join(user, d) {
			t.Errorf("%s: link to %q (%v)", d, to, err)
		}
	}
	for _, d := range []string{"uv", "objects", "entries"} {
		if fi, err := os.Lstat(filepath.Join(root, d)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			t.Errorf("%s is linked to the user's cache", d)
		}
	}
	if _, err := scratchCache(root, user); err == nil || !strings.Contains(err.Error(), "link the installed toolchains into the scratch cache") {
		t.Errorf("a second scratch cache over the first: %v", err)
	}
}

func TestLockPart(t *testing.T) {
	for in, want := range map[string]string{
		"sha256:lock+sha256:python+sha256:script": "sha256:lock",
		"sha256:lock": "sha256:lock",
		"":            "",
	} {
		if got := lockPart(in); got != want {
			t.Errorf("lockPart(%q) = %q, want %q", in, got, want)
		}
	}
}

// toolchains answers every lookup from one toolchain, by its digest; a
// tool named in missing is not installed.
type toolchains struct {
	name, digest string
	missing      string
}

func (f toolchains) Lookup(tool string) ([]string, string, string, string, error) {
	if tool == f.missing {
		return nil, "", "", "", fmt.Errorf("tool %s is not installed: run `edgepipe toolchain install`", tool)
	}
	return []string{"/opt/" + tool}, f.digest + "+sha256:script-" + tool, "1.0", f.name, nil
}

func TestSameToolchains(t *testing.T) {
	pl := loadPlan(t, twoTargets)
	only := closure(pl, []string{"a"})
	pubs := []*manifest.Manifest{{EdgepipeVersion: "0.9.0", Toolchains: map[string]manifest.Toolchain{
		"llamacpp": {LockDigest: "sha256:aaaa"},
		"other":    {LockDigest: "sha256:bbbb"}, // not used here now: not compared
	}}}
	dirs := []string{"out/a"}
	resolver := func(tc toolchains) *tools.Resolver { return &tools.Resolver{Toolchains: tc} }

	if err := sameToolchains(context.Background(), pl, only, resolver(toolchains{name: "llamacpp", digest: "sha256:aaaa"}), pubs, dirs); err != nil {
		t.Errorf("the same toolchain: %v", err)
	}
	err := sameToolchains(context.Background(), pl, only, resolver(toolchains{name: "llamacpp", digest: "sha256:cccc"}), pubs, dirs)
	var re *RefusedError
	want := "out/a was made with toolchain llamacpp sha256:aaaa; the one installed here is sha256:cccc. Reproduce with edgepipe 0.9.0, which installs that toolchain (edgepipe toolchain install llamacpp)"
	if !errors.As(err, &re) || err.Error() != want {
		t.Errorf("another toolchain:\n%v\nwant\n%s", err, want)
	}
	err = sameToolchains(context.Background(), pl, only, resolver(toolchains{name: "llamacpp", digest: "sha256:aaaa", missing: "llama-quantize"}), pubs, dirs)
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "step gguf-quantize:q4_k_m: tool llama-quantize is not installed") {
		t.Errorf("a missing tool: %v", err)
	}
}

// committed puts files (path -> content) in the cache under key, as a
// step's output, and returns their digests.
func committed(t *testing.T, c *cache.Cache, key string, files map[string]string) []digest.FileDigest {
	t.Helper()
	release, err := c.Lock(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	tmp, err := c.TempDir(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e, err := c.Commit(key, tmp, cache.Entry{Kind: "test", StepID: key[:8]})
	if err != nil {
		t.Fatal(err)
	}
	return e.Tree.Files
}

// Each step of the manifest is compared with its original where the
// user's cache still holds it, and its command lines beyond cache paths.
func TestCompareSteps(t *testing.T) {
	user, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	scratch, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	same, differs, gone := sha("1"), sha("2"), sha("3")
	orig := committed(t, user, same, map[string]string{"model.gguf": "weights"})
	committed(t, user, differs, map[string]string{"model.gguf": "weights", "imatrix.dat": "old"})
	rebuiltSame := committed(t, scratch, sha("4"), map[string]string{"model.gguf": "weights"})
	rebuiltOther := committed(t, scratch, sha("5"), map[string]string{"model.gguf": "weights", "imatrix.dat": "new", "extra.txt": "x"})
	if !reflect.DeepEqual(orig, rebuiltSame) {
		t.Fatalf("the same bytes digest differently: %v %v", orig, rebuiltSame)
	}

	origRoot := "/home/u/.cache/edgepipe"
	argv := func(root, key, typ string) [][]string {
		return [][]string{{"llama-quantize", root + "/objects/" + key + "/model.gguf", root + "/tmp/" + sha("9") + ".12.34/out.gguf", typ, "4"}}
	}
	pub := &manifest.Manifest{Steps: []manifest.Step{
		{ID: "source", Kind: "fetch", CacheKey: sha("0")},
		{ID: "q:same", Kind: "gguf-quantize", CacheKey: same, Argv: argv(origRoot, sha("6"), "Q8_0")},
		{ID: "q:differs", Kind: "gguf-quantize", CacheKey: differs, Argv: argv(origRoot, sha("6"), "Q8_0")},
		{ID: "q:gone", Kind: "gguf-quantize", CacheKey: gone},
		{ID: "q:nokey", Kind: "gguf-quantize"},
		{ID: "q:failed", Kind: "gguf-quantize", CacheKey: same},
		{ID: "publish:a", Kind: "publish"},
	}}
	out := func(key string, files []digest.FileDigest) *steps.Output {
		return &steps.Output{Key: key, Files: append(files, digest.FileDigest{Path: steps.LogFile, SHA256: sha("7")})}
	}
	res := &engine.RunResult{Outputs: map[string]*steps.Output{
		"q:same":    out(sha("4"), rebuiltSame),
		"q:differs": out(sha("5"), rebuiltOther),
		"q:gone":    out(sha("8"), rebuiltSame),
		"q:nokey":   out(sha("8"), rebuiltSame),
	}}
	// The rebuild ran in another cache, with other keys and thread grant:
	// the same commands. One step's type changed.
	rebuilt := &manifest.Manifest{Steps: []manifest.Step{
		{ID: "q:same", Argv: [][]string{{"llama-quantize", scratch.Root() + "/objects/" + sha("a") + "/model.gguf", scratch.Root() + "/tmp/" + sha("b") + ".56.78/out.gguf", "Q8_0", "2"}}},
		{ID: "q:differs", Argv: argv(scratch.Root(), sha("a"), "Q4_0")},
	}}
	got := compareSteps(pub, rebuilt, res, user, scratch.Root(), "/unused")
	want := []Step{
		{ID: "q:same", Status: Identical},
		{ID: "q:differs", Status: Differs, Files: []string{"extra.txt", "imatrix.dat"}, Argv: `command 1, argument 3: "Q8_0" then, "Q4_0" now`},
		{ID: "q:gone", Status: OriginalGone},
		{ID: "q:nokey", Status: OriginalGone},
		{ID: "q:failed", Status: NotRebuilt},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
	// Without the user's cache, nothing can be compared with an original.
	for _, s := range compareSteps(pub, nil, res, nil, scratch.Root(), "/unused") {
		if s.Status != OriginalGone && s.Status != NotRebuilt || s.Argv != "" {
			t.Errorf("without a cache: %+v", s)
		}
	}
}

func TestDiffFiles(t *testing.T) {
	a := []manifest.File{{Path: "x", SHA256: sha("1")}, {Path: "y", SHA256: sha("2")}, {Path: "gone", SHA256: sha("3")}}
	b := []manifest.File{{Path: "y", SHA256: sha("2")}, {Path: "x", SHA256: sha("9")}, {Path: "new", SHA256: sha("4")}}
	if got := DiffFiles(a, b); !reflect.DeepEqual(got, []string{"gone", "new", "x"}) {
		t.Errorf("DiffFiles = %v", got)
	}
	if got := DiffFiles(a, a); got != nil {
		t.Errorf("DiffFiles of the same = %v", got)
	}
}

func TestRefusedError(t *testing.T) {
	err := refused("the recipe %s changed", "r.yaml")
	var re *RefusedError
	if !errors.As(err, &re) || err.Error() != "the recipe r.yaml changed" || errors.Unwrap(err) == nil {
		t.Errorf("%v", err)
	}
}
