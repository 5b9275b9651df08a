// Package architecture holds the tests that keep the code's shape: the
// layers of the import graph (layers_test.go) and the complexity limit of
// a function, checked on every run so they cannot drift.
package architecture

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxComplexity bounds a function's cyclomatic complexity (gocyclo's
// count: 1, plus one per if, for, case, && and ||).
const maxComplexity = 30

func TestComplexity(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	packages := map[string]bool{}
	fset := token.NewFileSet()
	var over []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || name == ".git" || name == "bin" || strings.HasPrefix(name, ".") && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		packages[filepath.Dir(rel)] = true
		f, err := parser.ParseFile(fset, p, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if c := complexity(fn); c > maxComplexity {
				over = append(over, fset.Position(fn.Pos()).String()+": "+fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(over)
	for _, o := range over {
		t.Errorf("%s: cyclomatic complexity over %d: split it", o, maxComplexity)
	}
	if len(packages) < 20 {
		t.Fatalf("found only %d packages under %s: the walk looks in the wrong place", len(packages), root)
	}
}

// complexity is gocyclo's cyclomatic complexity of a function.
func complexity(fn *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}
