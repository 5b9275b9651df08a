package lockfile

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sample() *Lock {
	return &Lock{
		LockVersion: Version, EdgepipeVersion: "1.2.0", Platform: "linux/amd64",
		Source: Source{URI: "hf://org/model@main", Revision: strings.Repeat("a", 40), Files: []File{
			{Path: "model.safetensors", SHA256: strings.Repeat("1", 64), Size: 10},
			{Path: "config.json", SHA256: strings.Repeat("2", 64), Size: 2},
		}},
		Data:       map[string]string{"builtin:eval": strings.Repeat("3", 64), "eval.txt": strings.Repeat("4", 64)},
		Toolchains: map[string]Toolchain{"llamacpp": {LockDigest: "sha256:" + strings.Repeat("5", 64), Versions: "llama.cpp 0c1e57098"}},
		Tools: map[string]Tool{
			"llama-quantize": {From: "toolchain llamacpp", Identity: "sha256:" + strings.Repeat("5", 64)},
			"my-tool":        {From: "tool-path", Identity: "sha256:" + strings.Repeat("6", 64), Version: "my-tool 1.0"},
		},
	}
}

func TestMarshalIsDeterministicAndSorted(t *testing.T) {
	a, err := Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	// The same lock with its source files in another order.
	l := sample()
	l.Source.Files[0], l.Source.Files[1] = l.Source.Files[1], l.Source.Files[0]
	b, err := Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatalf("the same lock gave different bytes:\n%s\n%s", a, b)
	}
	s := string(a)
	if strings.Index(s, `"config.json"`) > strings.Index(s, `"model.safetensors"`) {
		t.Errorf("source files are not sorted by path:\n%s", s)
	}
	if strings.Index(s, `"builtin:eval"`) > strings.Index(s, `"eval.txt"`) {
		t.Errorf("data keys are not sorted:\n%s", s)
	}
	if !strings.HasSuffix(s, "}\n") || !strings.Contains(s, "\n  \"platform\"") {
		t.Errorf("want indented JSON ending in one newline:\n%s", s)
	}
	// Marshal does not reorder the caller's slice.
	if l.Source.Files[0].Path != "config.json" {
		t.Errorf("Marshal sorted the caller's files in place")
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.yaml.lock")
	if err := Write(path, sample()); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := sample()
	want.Source.Files[0], want.Source.Files[1] = want.Source.Files[1], want.Source.Files[0] // written sorted
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %+v, want %+v", got, want)
	}
	if d := Diff(sample(), got); len(d) != 0 {
		t.Fatalf("a lock differs from itself read back: %v", d)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("Write left %d files, want only the lock", len(ents))
	}
}

func TestReadMissingAndForeign(t *testing.T) {
	dir := t.TempDir()
	if l, err := Read(filepath.Join(dir, "none.lock")); l != nil || err != nil {
		t.Fatalf("a missing lock: got %v, %v; want nil, nil", l, err)
	}
	for name, body := range map[string]string{
		"unknown field": `{"lock_version": 1, "surprise": true}`,
		"not json":      "edgepipe: 1\n",
		"old version":   `{"lock_version": 99}`,
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := Read(p); err == nil || !strings.Contains(err.Error(), "edgepipe lock") {
			t.Errorf("%s: got %v, want an error that says to run edgepipe lock", name, err)
		}
	}
}

func TestDiff(t *testing.T) {
	now := sample()
	now.Platform = "darwin/arm64"
	now.Source.Revision = strings.Repeat("b", 40)
	now.Source.Files[0].SHA256 = strings.Repeat("7", 64)
	now.Source.Files[0].Size = 11
	delete(now.Data, "eval.txt")
	now.Data["calib.txt"] = strings.Repeat("8", 64)
	now.Toolchains["llamacpp"] = Toolchain{LockDigest: "sha256:" + strings.Repeat("9", 64), Versions: "llama.cpp 0c1e57098"}
	now.Tools["my-tool"] = Tool{From: "tool-path", Identity: now.Tools["my-tool"].Identity, Version: "my-tool 1.1"}

	got := Diff(sample(), now)
	want := []Change{
		{Field: "platform", Locked: "linux/amd64", Now: "darwin/arm64"},
		{Field: "source.resolved_revision", Locked: strings.Repeat("a", 40), Now: strings.Repeat("b", 40)},
		{Field: "source.files[model.safetensors]", Locked: "sha256:" + strings.Repeat("1", 64) + " (10 bytes)", Now: "sha256:" + strings.Repeat("7", 64) + " (11 bytes)"},
		{Field: "data[calib.txt]", Locked: "", Now: "sha256:" + strings.Repeat("8", 64)},
		{Field: "data[eval.txt]", Locked: "sha256:" + strings.Repeat("4", 64), Now: ""},
		{Field: "toolchains.llamacpp.lock_digest", Locked: "sha256:" + strings.Repeat("5", 64), Now: "sha256:" + strings.Repeat("9", 64)},
		{Field: "tools.my-tool.version", Locked: "my-tool 1.0", Now: "my-tool 1.1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff:\n got %v\nwant %v", got, want)
	}
	if d := Diff(sample(), sample()); d != nil {
		t.Fatalf("equal locks differ: %v", d)
	}
}

func TestMismatchErrorSaysHowToFix(t *testing.T) {
	e := &MismatchError{Path: "r.yaml.lock", Recipe: "r.yaml", Changes: Diff(sample(), func() *Lock {
		l := sample()
		l.Platform = "darwin/arm64"
		l.Data["builtin:eval"] = strings.Repeat("0", 64)
		return l
	}())}
	msg := e.Error()
	for _, want := range []string{
		"r.yaml.lock does not match what r.yaml resolves to now (2 change(s))",
		"  platform: locked linux/amd64, now darwin/arm64\n",
		"  data[builtin:eval]: locked sha256:" + strings.Repeat("3", 64) + ", now sha256:" + strings.Repeat("0", 64) + "\n",
		"The lock was made on linux/amd64",
		"`edgepipe run --update-lock r.yaml`",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Index(msg, "platform:") > strings.Index(msg, "data[") {
		t.Errorf("the platform, which explains the rest, should come first:\n%s", msg)
	}
	if c := (Change{Field: "data[x]", Now: "sha256:1"}); c.String() != "data[x]: locked (absent), now sha256:1" {
		t.Errorf("Change.String: %q", c)
	}
}
