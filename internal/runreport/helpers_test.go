package runreport

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	_ "github.com/edgepipe/edgepipe/pipelines" // the families plan.Expand needs
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

func ptr[T any](v T) *T { return &v }

// loadPlan expands a recipe the way a run does, families included.
func loadPlan(t *testing.T, src string) *plan.Plan {
	t.Helper()
	r, err := recipe.LoadBytes("recipe.yaml", []byte(src), plan.Catalog{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Expand(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// publishFolder writes a published folder: files (path -> content) and a
// manifest naming target, so manifest.Read accepts it.
func publishFolder(t *testing.T, dir, target string, files map[string]string, m manifest.Manifest) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.EdgepipeVersion, m.Target.Name = "test", target
	if m.Recipe.Name == "" {
		m.Recipe.Name = "r"
	}
	if err := manifest.Write(dir, &m); err != nil {
		t.Fatal(err)
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
// Each placeholder's value (a temporary folder) is replaced by its key
// first, so the file does not depend on where the test ran.
func golden(t *testing.T, name string, got []byte, placeholders map[string]string) {
	t.Helper()
	for key, value := range placeholders {
		got = bytes.ReplaceAll(got, []byte(value), []byte(key))
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what was made (go test -update rewrites it); got:\n%s\n--- want:\n%s", path, got, want)
	}
}

// lines splits text into its lines, for checks on one line of a table.
func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }
