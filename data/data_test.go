package data

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The names recipes write after builtin:; renaming one breaks recipes.
var wantNames = []string{"calibration", "chat-prompts", "digits-calibration", "digits-test", "eval", "skimage-photos", "skimage-photos-calibration", "tokenizer-corpus"}

func TestNamesAreTheFilesInTheFolder(t *testing.T) {
	if got := Names(); !slices.Equal(got, wantNames) {
		t.Fatalf("Names() = %q, want %q", got, wantNames)
	}
	// Every .txt and .npz beside the package is embedded, once by name:
	// a set added to the folder but not to the embed pattern (or two
	// files with the same name and different extensions) would show here.
	var onDisk []string
	for _, pat := range []string{"*.txt", "*.npz", "*.json"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			onDisk = append(onDisk, strings.TrimSuffix(f, filepath.Ext(f)))
		}
	}
	slices.Sort(onDisk)
	if !slices.Equal(onDisk, Names()) {
		t.Errorf("files in data/ %q, Names() %q", onDisk, Names())
	}
}

func TestBytesAreTheFilesBytes(t *testing.T) {
	for _, name := range Names() {
		got, err := Bytes(name)
		if err != nil {
			t.Fatalf("Bytes(%q): %v", name, err)
		}
		file, _ := filepath.Glob(name + ".*")
		if len(file) != 1 {
			t.Fatalf("%s: files %q", name, file)
		}
		want, err := os.ReadFile(file[0])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Bytes(%q) is not %s's content (%d bytes, file %d)", name, file[0], len(got), len(want))
		}
	}
}

func TestBytesRefusesWhatIsNotABuiltInName(t *testing.T) {
	for _, name := range []string{"nope", "", "eval.txt", "EVAL", "../data/eval", "./eval", "eval/", "digits-test.npz"} {
		b, err := Bytes(name)
		if err == nil {
			t.Errorf("Bytes(%q) = %d bytes, want an error", name, len(b))
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "no built-in data set") || !strings.Contains(msg, strings.Join(wantNames, ", ")) {
			t.Errorf("Bytes(%q): %q: want the refusal to list the built-in names", name, msg)
		}
	}
}

// materialized is the file Materialize must write for name.
func materialized(t *testing.T, dir, name, ext string) (string, []byte) {
	t.Helper()
	b, err := Bytes(name)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:8])+ext), b
}

func TestMaterializeWritesTheBytesUnderTheirDigest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b") // created on the way
	for name, ext := range map[string]string{"eval": ".txt", "digits-test": ".npz"} {
		got, err := Materialize(name, dir)
		if err != nil {
			t.Fatalf("Materialize(%q): %v", name, err)
		}
		want, b := materialized(t, dir, name, ext)
		if got != want {
			t.Errorf("Materialize(%q) = %s, want %s", name, got, want)
		}
		onDisk, err := os.ReadFile(got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(onDisk, b) {
			t.Errorf("%s does not hold %s's bytes", got, name)
		}
	}
	// The two files and nothing else: no temporary file is left behind.
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("%s holds %q, want the two materialized files", dir, names)
	}
}

func TestMaterializeKeepsACompleteFileAndRewritesAPartOne(t *testing.T) {
	dir := t.TempDir()
	path, b := materialized(t, dir, "calibration", ".txt")

	// A complete file from an earlier run is used as it is.
	if _, err := Materialize("calibration", dir); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if got, err := Materialize("calibration", dir); err != nil || got != path {
		t.Fatalf("Materialize again = %s, %v", got, err)
	}
	if st, err := os.Stat(path); err != nil || !st.ModTime().Equal(old) {
		t.Errorf("a complete file was written again (%v)", err)
	}

	// A file cut short (an interrupted copy by other means) is replaced.
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Materialize("calibration", dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, b) {
		t.Errorf("a short file was kept: %d bytes, want %d", len(got), len(b))
	}
}

func TestMaterializeRefusals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if p, err := Materialize("nope", dir); err == nil || !strings.Contains(err.Error(), "no built-in data set \"nope\"") {
		t.Errorf("Materialize(nope) = %q, %v", p, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an unknown name created %s (%v)", dir, err)
	}
	// The folder cannot be made: a file is in the way.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := Materialize("eval", filepath.Join(blocker, "data")); err == nil {
		t.Errorf("Materialize under a file = %q, want an error", p)
	}
}

func TestResolver(t *testing.T) {
	cache, recipeDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(recipeDir, "mine.txt"), []byte("words"), 0o644); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(t.TempDir(), "abs.txt")
	if err := os.WriteFile(abs, []byte("words"), 0o644); err != nil {
		t.Fatal(err)
	}
	resolve := Resolver(cache, recipeDir)

	want, _ := materialized(t, filepath.Join(cache, "data"), "eval", ".txt")
	if got, err := resolve("builtin:eval"); err != nil || got != want {
		t.Errorf("builtin:eval = %q, %v; want %q", got, err, want)
	}
	if got, err := resolve("mine.txt"); err != nil || got != filepath.Join(recipeDir, "mine.txt") {
		t.Errorf("mine.txt = %q, %v: want it beside the recipe", got, err)
	}
	if got, err := resolve(abs); err != nil || got != abs {
		t.Errorf("%s = %q, %v: want the absolute path as it is", abs, got, err)
	}

	_, err := resolve("missing.txt")
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing.txt") ||
		!strings.Contains(err.Error(), "relative to the recipe file") {
		t.Errorf("missing.txt: %v: want a not-exist error naming the file and the fix", err)
	}
	if _, err := resolve("builtin:nope"); err == nil || !strings.Contains(err.Error(), "built-in data sets are") {
		t.Errorf("builtin:nope: %v", err)
	}
	// builtin: is a prefix, not a file in the recipe's folder.
	if _, err := resolve("eval"); err == nil {
		t.Error("a bare name resolved: want builtin: to be required")
	}
}

// The package comment and data/README.md name every built-in set.
func TestDocsNameEveryBuiltIn(t *testing.T) {
	for _, doc := range []string{"data.go", "README.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range Names() {
			if !bytes.Contains(b, []byte("`builtin:"+name+"`")) {
				t.Errorf("%s does not mention `builtin:%s`", doc, name)
			}
		}
	}
}

// The decode checks read the chat prompts by these keys
// (generate_reference.py): a few short single-turn prompts with distinct
// ids, the first brief enough that a chat model stops at EOS early, and
// the instruction of a sliding-window model's extra sequence.
func TestChatPromptsAreWhatTheDecodeChecksRead(t *testing.T) {
	b, err := Bytes("chat-prompts")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		About   string `json:"about"`
		Prompts []struct {
			ID       string `json:"id"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		} `json:"prompts"`
		Window struct {
			ID          string `json:"id"`
			Instruction string `json:"instruction"`
		} `json:"window"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("chat-prompts.json: %v", err)
	}
	if n := len(f.Prompts); n < 3 || n > 4 {
		t.Errorf("%d prompts, want 3 or 4: each costs a decode per target", n)
	}
	ids := map[string]bool{f.Window.ID: true}
	for i, p := range f.Prompts {
		if p.ID == "" || ids[p.ID] {
			t.Errorf("prompt %d: id %q is empty or repeated", i, p.ID)
		}
		ids[p.ID] = true
		if len(p.Messages) != 1 || p.Messages[0].Role != "user" || p.Messages[0].Content == "" {
			t.Errorf("prompt %s: want one non-empty user turn, got %+v", p.ID, p.Messages)
		}
		if len(p.Messages) > 0 && len(p.Messages[0].Content) > 120 {
			t.Errorf("prompt %s is %d characters: keep the prompts short", p.ID, len(p.Messages[0].Content))
		}
	}
	if len(f.Prompts) > 0 && !strings.HasPrefix(f.Prompts[0].Messages[0].Content, "Answer with one word") {
		t.Errorf("the first prompt must ask for one word (the model stops at EOS early): %q", f.Prompts[0].Messages[0].Content)
	}
	if f.Window.ID == "" || f.Window.Instruction == "" {
		t.Errorf("window: %+v, want an id and an instruction", f.Window)
	}
}
