package architecture

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// untestedOK are packages with code and no test files of their own, and
// why that is right.
var untestedOK = map[string]string{
	"internal/testray":       "a local Ray cluster for tests: TestRealRay and the ray bench exercise it",
	"internal/testseaweed":   "an S3 server for tests: the remote-cache tests exercise it",
	"internal/testregistry":  "an OCI registry for tests: the OCI and provenance tests exercise it",
	"internal/buildinfo":     "the version string from the build's metadata",
	"bench/benchdata":        "writes the benchmarks' data; the bench tests read it",
	"internal/gguf/gguftest": "a GGUF writer for tests: internal/gguf's round trips check it against the reader, and the reader against gguf-py's own file",
}

// minTestedLines is the size above which a package must have tests: below
// it, a package registers things or holds constants.
const minTestedLines = 60

// minTestRatio is the project's floor for test lines per code line
// (non-blank lines: Go tests, txtar CLI scripts and Python test modules
// against Go and Python code).
const minTestRatio = 0.6

type lineCount struct{ code, test int }

func countLines(t *testing.T, root string) (perPackage map[string]*lineCount, total lineCount) {
	t.Helper()
	perPackage = map[string]*lineCount{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "bin" || name == "artifacts" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		var isTest bool
		switch {
		case strings.HasSuffix(name, "_test.go"):
			isTest = true
		case strings.HasSuffix(name, ".go"):
		case strings.HasSuffix(name, ".txtar") && strings.Contains(rel, "testdata/script/"):
			isTest = true
		case strings.HasSuffix(name, ".py") && strings.Contains(rel, "/tests/"):
			isTest = true
		case strings.HasSuffix(name, ".py") && !strings.Contains(rel, "testdata/"):
		default:
			return nil
		}
		n, err := nonBlank(p)
		if err != nil {
			return err
		}
		if isTest {
			total.test += n
		} else {
			total.code += n
		}
		if strings.HasSuffix(name, ".go") && !strings.Contains(rel, "testdata/") {
			pkg := filepath.ToSlash(filepath.Dir(rel))
			if perPackage[pkg] == nil {
				perPackage[pkg] = &lineCount{}
			}
			if isTest {
				perPackage[pkg].test += n
			} else {
				perPackage[pkg].code += n
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return perPackage, total
}

func nonBlank(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			n++
		}
	}
	return n, sc.Err()
}

// TestTestsBesideLogic: every package with logic has tests of its own,
// and the tree keeps its test ratio.
func TestTestsBesideLogic(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs, total := countLines(t, root)
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		c := pkgs[p]
		if c.test > 0 || c.code < minTestedLines || strings.HasPrefix(p, "test/") {
			continue
		}
		if strings.Contains(p, "/cmd/") || strings.HasPrefix(p, "cmd/") {
			continue // a command's logic is in the packages it calls
		}
		if _, ok := untestedOK[p]; !ok {
			t.Errorf("package %s has %d lines of code and no tests: test its logic, or say in untestedOK why it needs none", p, c.code)
		}
	}
	ratio := float64(total.test) / float64(total.code)
	t.Logf("test lines %d, code lines %d: %.3f per line of code", total.test, total.code, ratio)
	if ratio < minTestRatio {
		t.Errorf("the tree has %.3f test lines per line of code, under the floor of %.2f", ratio, minTestRatio)
	}
}
