package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/cli-commands.md is generated from the command tree; a flag or a
// command added, renamed or reworded without regenerating it fails here.
func TestCommandReferenceCurrent(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCommandReference(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "cli-commands.md")
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the committed reference: %v; create it: run `%s`", err, RegenerateReferenceCommand)
	}
	if !bytes.Equal(committed, b.Bytes()) {
		t.Fatalf("docs/cli-commands.md is out of date with the commands and flags: run `%s` from the repository root and commit it\n%s",
			RegenerateReferenceCommand, firstDifference(string(committed), b.String()))
	}
}

// Every command of the tree has its section, one added beside commands()
// (as completion is) too.
func TestCommandReferenceComplete(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCommandReference(&b); err != nil {
		t.Fatal(err)
	}
	root := newRoot(&Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }})
	for _, c := range root.Commands() {
		if c.IsAdditionalHelpTopicCommand() {
			continue // exit-codes: its table heads the page
		}
		if !strings.Contains(b.String(), "\n## "+c.CommandPath()+"\n") {
			t.Errorf("docs/cli-commands.md has no section for %q: add it to WriteCommandReference", c.CommandPath())
		}
	}
}

func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("first difference at line %d:\n  committed: %s\n  generated: %s", i+1, x, y)
		}
	}
	return ""
}
