package reproduce

import (
	"reflect"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

func sha(c string) string { return strings.Repeat(c, 64) }

func published() *manifest.Manifest {
	return &manifest.Manifest{
		Target: manifest.Target{Name: "t", Format: "gguf-q8_0"},
		Source: manifest.Source{Files: []manifest.File{{Path: "model.safetensors", SHA256: sha("a"), Size: 3}}},
		Files: []manifest.File{
			{Path: "logs/q.log", SHA256: sha("1"), Size: 1},
			{Path: "model.gguf", SHA256: sha("2"), Size: 2},
			{Path: "tokenizer.json", SHA256: sha("3"), Size: 3},
			{Path: "weights.bin", SHA256: sha("4"), Size: 4},
		},
		Metrics: manifest.Metrics{Perplexity: &manifest.Perplexity{Baseline: 24.0, Converted: 24.5}},
	}
}

func statuses(r Report) map[string]string {
	m := map[string]string{}
	for _, f := range r.Files {
		m[f.Path] = f.Status
	}
	return m
}

func TestCompareIdentical(t *testing.T) {
	pub := published()
	again := published()
	again.Files[0].SHA256 = sha("9") // logs differ: times and paths
	again.Metrics.Perplexity = &manifest.Perplexity{Baseline: 24.0, Converted: 24.5}
	r := Compare("d", pub, nil, again, pub.Source.Files)
	if !r.Identical {
		t.Fatalf("identical files, differing log: want identical, got %+v", r)
	}
	want := map[string]string{"logs/q.log": Log, "model.gguf": Identical, "tokenizer.json": Identical, "weights.bin": Identical}
	if got := statuses(r); !reflect.DeepEqual(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	if r.Perplexity == nil || r.Perplexity.Delta != 0 || r.Perplexity.Published != 24.5 {
		t.Errorf("perplexity %+v", r.Perplexity)
	}
}

func TestCompareDifferences(t *testing.T) {
	pub := published()
	again := published()
	again.Files = []manifest.File{
		{Path: "logs/q.log", SHA256: sha("1"), Size: 1},
		{Path: "model.gguf", SHA256: sha("8"), Size: 2}, // other bytes
		{Path: "tokenizer.json", SHA256: sha("3"), Size: 3},
		// weights.bin not made
		{Path: "new.txt", SHA256: sha("5"), Size: 5},
	}
	again.Metrics.Perplexity = &manifest.Perplexity{Baseline: 24.0, Converted: 24.75}
	// tokenizer.json was edited in the published folder, and a file added.
	problems := []manifest.Problem{
		{Path: "tokenizer.json", Kind: manifest.Changed, Want: "x", Got: "sha256 " + sha("7")},
		{Path: "notes.txt", Kind: manifest.Extra, Got: "4 bytes"},
	}
	src := []manifest.File{{Path: "model.safetensors", SHA256: sha("b"), Size: 3}}
	r := Compare("d", pub, problems, again, src)
	if r.Identical {
		t.Fatal("want not identical")
	}
	want := map[string]string{
		"logs/q.log": Log, "model.gguf": Differs, "tokenizer.json": Tampered, "weights.bin": Missing,
		"new.txt": Extra, "notes.txt": Tampered,
	}
	if got := statuses(r); !reflect.DeepEqual(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	for _, f := range r.Files {
		if f.Path == "model.gguf" && (f.Published != sha("2") || f.Rebuilt != sha("8")) {
			t.Errorf("model.gguf digests %+v", f)
		}
		if f.Path == "tokenizer.json" && !strings.Contains(f.OnDisk, sha("7")) {
			t.Errorf("tokenizer.json should say what the folder holds: %+v", f)
		}
	}
	if !reflect.DeepEqual(r.SourceDiffers, []string{"model.safetensors"}) {
		t.Errorf("source differs %v", r.SourceDiffers)
	}
	if p := r.Perplexity; p == nil || p.Delta != 0.25 || p.Rebuilt != 24.75 {
		t.Errorf("perplexity %+v, want a +0.25 delta", p)
	}
}

func TestCompareSourceAloneFailsTheVerdict(t *testing.T) {
	pub := published()
	r := Compare("d", pub, nil, published(), nil)
	if r.Identical || !reflect.DeepEqual(r.SourceDiffers, []string{"model.safetensors"}) {
		t.Fatalf("a rebuild that read other source files is not a reproduction: %+v", r)
	}
}

func TestCompareNotRebuilt(t *testing.T) {
	pub := published()
	r := Compare("d", pub, nil, nil, pub.Source.Files)
	if r.Identical {
		t.Fatal("a target the rebuild did not publish cannot be identical")
	}
	if statuses(r)["model.gguf"] != NotRebuilt {
		t.Errorf("statuses %v", statuses(r))
	}
	r.RebuiltPerplexity(pub, 24.0, 30.0)
	if r.Perplexity == nil || r.Perplexity.Delta != 5.5 {
		t.Errorf("perplexity of a failed rebuild %+v", r.Perplexity)
	}
}

func TestArgvNormalization(t *testing.T) {
	key1, key2 := sha("c"), sha("d")
	steps := []manifest.Step{{Argv: [][]string{{
		"/home/u/.cache/edgepipe/toolchains/llamacpp-1/bin/llama-quantize",
		"/home/u/.cache/edgepipe/toolchains/helpers-4d059ea469ea6a0e/x.py",
		"/home/u/.cache/edgepipe/objects/" + key1 + "/model-f16.gguf",
		"/home/u/.cache/edgepipe/tmp/" + key1 + ".123.456/model-q8_0.gguf", "Q8_0",
	}}}}
	root := CacheRoot(steps)
	if root != "/home/u/.cache/edgepipe" {
		t.Fatalf("CacheRoot = %q", root)
	}
	again := [][]string{{
		"/home/u/.cache/edgepipe/toolchains/llamacpp-1/bin/llama-quantize",
		"/home/u/.cache/edgepipe/toolchains/helpers-c6e01a6e40258ab5/x.py",
		"/tmp/scratch/cache/objects/" + key2 + "/model-f16.gguf",
		"/tmp/scratch/cache/tmp/" + key2 + ".9.87/model-q8_0.gguf", "Q8_0",
	}}
	a := NormalizeArgv(steps[0].Argv, root)
	b := NormalizeArgv(again, "/tmp/scratch/cache", "/home/u/.cache/edgepipe")
	if d := ArgvDifference(a, b); d != "" {
		t.Fatalf("the same command in two caches differs: %s\n%v\n%v", d, a, b)
	}
	if a[0][2] != "$CACHE/objects/KEY/model-f16.gguf" || a[0][1] != "$CACHE/toolchains/helpers/x.py" {
		t.Errorf("normalized %q", a[0])
	}
	again[0][4] = "Q4_0"
	b = NormalizeArgv(again, "/tmp/scratch/cache", "/home/u/.cache/edgepipe")
	if d := ArgvDifference(a, b); !strings.Contains(d, `argument 4: "Q8_0" then, "Q4_0" now`) {
		t.Errorf("ArgvDifference = %q", d)
	}
	if d := ArgvDifference(a, append(b, []string{"x"})); d != "1 command(s) then, 2 now" {
		t.Errorf("ArgvDifference = %q", d)
	}
	if CacheRoot(nil) != "" {
		t.Error("no argv, no root")
	}
}

// The thread grant is the scheduler's, not the build's: a rebuild at another
// -j runs the same command. A flag named alike that takes no count (qnn's
// -t TARGET) and any other argument still count.
func TestNormalizeArgvThreadGrant(t *testing.T) {
	then := [][]string{{"llama-perplexity", "-m", "m.gguf", "-t", "2"}, {"python", "x.py", "--threads", "2", "--runs", "2"}}
	now := [][]string{{"llama-perplexity", "-m", "m.gguf", "-t", "1"}, {"python", "x.py", "--threads", "1", "--runs", "2"}}
	if d := ArgvDifference(NormalizeArgv(then), NormalizeArgv(now)); d != "" {
		t.Errorf("a grant of 1 thread against 2 counts as another command: %s", d)
	}
	now[1][5] = "3"
	if d := ArgvDifference(NormalizeArgv(then), NormalizeArgv(now)); !strings.Contains(d, `argument 5: "2" then, "3" now`) {
		t.Errorf("--runs 2 against 3: ArgvDifference = %q", d)
	}
	// llama-quantize takes its threads as an optional last positional.
	q1 := [][]string{{"/tc/bin/llama-quantize", "in.gguf", "out.gguf", "Q8_0", "2"}}
	q2 := [][]string{{"/tc/bin/llama-quantize", "in.gguf", "out.gguf", "Q8_0", "1"}}
	if d := ArgvDifference(NormalizeArgv(q1), NormalizeArgv(q2)); d != "" {
		t.Errorf("llama-quantize at another grant counts as another command: %s", d)
	}
	q2[0][3] = "Q4_0"
	if d := ArgvDifference(NormalizeArgv(q1), NormalizeArgv(q2)); !strings.Contains(d, `argument 3: "Q8_0" then, "Q4_0" now`) {
		t.Errorf("another quantization type: ArgvDifference = %q", d)
	}
	a := [][]string{{"qnn-model-lib-generator", "-t", "x86_64-linux-clang"}}
	b := [][]string{{"qnn-model-lib-generator", "-t", "aarch64-android"}}
	if d := ArgvDifference(NormalizeArgv(a), NormalizeArgv(b)); d == "" {
		t.Error("-t with another target normalized away")
	}
}
