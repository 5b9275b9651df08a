package manifest

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writtenArtifact(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"model.gguf":       "weights v1",
		"tokenizer.json":   "{}",
		"logs/convert.log": "ok\n",
	})
	if err := Write(dir, fullManifest()); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestVerifyCleanFolder(t *testing.T) {
	dir := writtenArtifact(t)
	problems, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("fresh folder has problems: %v", problems)
	}
}

func TestVerifyFindsDifferences(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, dir string)
		want   []Problem // Want and Got are checked as prefixes
	}{
		{
			name:   "missing",
			change: func(t *testing.T, dir string) { must(t, os.Remove(filepath.Join(dir, "tokenizer.json"))) },
			want:   []Problem{{Path: "tokenizer.json", Kind: Missing, Want: "sha256 44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a, 2 bytes"}},
		},
		{
			name:   "changed same size",
			change: func(t *testing.T, dir string) { writeTree(t, dir, map[string]string{"model.gguf": "weights v2"}) },
			want:   []Problem{{Path: "model.gguf", Kind: Changed, Got: "sha256 "}},
		},
		{
			name: "changed size",
			change: func(t *testing.T, dir string) {
				writeTree(t, dir, map[string]string{"logs/convert.log": "ok, longer\n"})
			},
			want: []Problem{{Path: "logs/convert.log", Kind: Changed, Got: "11 bytes"}},
		},
		{
			name: "extra files",
			change: func(t *testing.T, dir string) {
				writeTree(t, dir, map[string]string{"notes.txt": "hi", "logs/late.log": "late"})
			},
			want: []Problem{{Path: "logs/late.log", Kind: Extra, Got: "4 bytes"}, {Path: "notes.txt", Kind: Extra, Got: "2 bytes"}},
		},
		{
			name: "file replaced by symlink",
			change: func(t *testing.T, dir string) {
				p := filepath.Join(dir, "model.gguf")
				must(t, os.Remove(p))
				must(t, os.Symlink("/etc/hostname", p))
			},
			want: []Problem{{Path: "model.gguf", Kind: Changed, Got: "a symlink, not a plain file"}},
		},
		{
			name: "all at once, sorted",
			change: func(t *testing.T, dir string) {
				must(t, os.Remove(filepath.Join(dir, "tokenizer.json")))
				writeTree(t, dir, map[string]string{"model.gguf": "weights v2", "a.txt": "a"})
			},
			want: []Problem{{Path: "a.txt", Kind: Extra}, {Path: "model.gguf", Kind: Changed}, {Path: "tokenizer.json", Kind: Missing}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writtenArtifact(t)
			tt.change(t, dir)
			got, err := Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems = %v, want %v", got, tt.want)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Path != w.Path || g.Kind != w.Kind || !strings.HasPrefix(g.Want, w.Want) || !strings.HasPrefix(g.Got, w.Got) {
					t.Errorf("problem %d = %+v, want %+v", i, g, w)
				}
				if !strings.HasPrefix(g.String(), g.Path+" ") {
					t.Errorf("sentence %q does not start with the path", g.String())
				}
			}
		})
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{Path: "a", Kind: Missing, Want: "sha256 x, 1 bytes"}, "a is missing (the manifest records sha256 x, 1 bytes)"},
		{Problem{Path: "a", Kind: Changed, Want: "sha256 x, 1 bytes", Got: "2 bytes"}, "a has changed: the manifest records sha256 x, 1 bytes, the folder holds 2 bytes"},
		{Problem{Path: "b", Kind: Extra, Got: "3 bytes"}, "b is not listed in the manifest (3 bytes)"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestReadRefuses(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"not json", "{", "not valid JSON"},
		{"no version", `{"files": []}`, "no manifest_version"},
		{"newer version", `{"manifest_version": 2}`, "use a newer edgepipe"},
		{"escaping path", `{"manifest_version": 1, "files": [{"path": "../etc/passwd", "sha256": "` + strings.Repeat("0", 64) + `", "size": 1}]}`, "not a relative"},
		{"absolute path", `{"manifest_version": 1, "files": [{"path": "/etc/passwd", "sha256": "` + strings.Repeat("0", 64) + `", "size": 1}]}`, "not a relative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{FileName: tt.json})
			_, err := Read(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Read error = %v, want one containing %q", err, tt.want)
			}
			if _, err := Verify(dir); err == nil {
				t.Error("Verify accepted a manifest Read refuses")
			}
		})
	}
	if _, err := Read(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a published edgepipe artifact folder") {
		t.Errorf("Read of a folder without manifest: %v", err)
	}
}

func TestReadAcceptsUnknownFields(t *testing.T) {
	dir := writtenArtifact(t)
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	must(t, err)
	data = []byte(strings.Replace(string(data), `"manifest_version": 1,`, `"manifest_version": 1, "added_later": {"x": 1},`, 1))
	must(t, os.WriteFile(filepath.Join(dir, FileName), data, 0o644))
	m, err := Read(dir)
	must(t, err)
	if !reflect.DeepEqual(m.Target, fullManifest().Target) {
		t.Errorf("target = %+v", m.Target)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
