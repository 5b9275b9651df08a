package data

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Resolver resolves a data reference: builtin:NAME to the text shipped in
// the binary (written once under cacheRoot/data), anything else to a path
// relative to the recipe's folder, which must exist.
func Resolver(cacheRoot, recipeDir string) func(ref string) (string, error) {
	return func(ref string) (string, error) {
		if name, ok := strings.CutPrefix(ref, "builtin:"); ok {
			return Materialize(name, filepath.Join(cacheRoot, "data"))
		}
		p := ref
		if !filepath.IsAbs(p) {
			p = filepath.Join(recipeDir, p)
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("data file %s: %w: fix the path under data: in the recipe (paths are relative to the recipe file)", ref, err)
		}
		return p, nil
	}
}
