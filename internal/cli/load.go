package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/tools"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/steps"
)

// loadPlan parses, validates and expands a recipe; every problem found is
// reported at once, with its place in the file.
func loadPlan(path string) (*plan.Plan, error) {
	if path == "" {
		return nil, usageErr("name a recipe file, e.g. edgepipe run recipes/demo.yaml")
	}
	// Load validates whatever parsed cleanly even when parsing found
	// problems, so a mistyped key and an unknown device show up together.
	r, err := recipe.Load(path, plan.Catalog{}, append(steps.Names(), "publish"))
	if err != nil {
		return nil, err
	}
	pl, err := plan.Expand(r)
	if err != nil {
		return nil, err
	}
	// The memory pre-flight and budgets: a target that cannot work on its
	// device is refused before an hour of conversion.
	if diags, _ := edge.Preflight(pl.Recipe); len(diags) > 0 {
		return nil, diags
	}
	return pl, nil
}

// cacheDir is --cache-dir, else EDGEPIPE_CACHE, else the user cache folder.
func (c *common) cacheRoot(env *Env) (string, error) {
	if c.cacheDir != "" {
		return filepath.Abs(c.cacheDir)
	}
	if x := env.Getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "edgepipe"), nil
	}
	home := env.Getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("no cache folder: set --cache-dir or EDGEPIPE_CACHE")
		}
	}
	return filepath.Join(home, ".cache", "edgepipe"), nil
}

func (c *common) openCache(env *Env) (*cache.Cache, error) {
	root, err := c.cacheRoot(env)
	if err != nil {
		return nil, err
	}
	ca, err := cache.Open(root)
	if err != nil {
		return nil, fmt.Errorf("open the cache at %s: %w", root, err)
	}
	if c.verify {
		ca.SetVerify(true)
	}
	return ca, nil
}

// toolResolver builds the tool resolver: recipe overrides, then --tool-path, then
// the installed toolchains.
func (c *common) toolResolver(pl *plan.Plan, cacheRoot string) *tools.Resolver {
	tr := &tools.Resolver{Toolchains: installedToolchains{cacheRoot: cacheRoot}}
	if c.toolPath != "" {
		for _, d := range strings.Split(c.toolPath, string(os.PathListSeparator)) {
			if d != "" {
				tr.Path = append(tr.Path, d)
			}
		}
	}
	if pl != nil {
		for _, tc := range pl.Recipe.Toolchains {
			for name, p := range tc.Tools {
				if tr.Overrides == nil {
					tr.Overrides = map[string]string{}
				}
				if !filepath.IsAbs(p) && strings.Contains(p, "/") {
					p = filepath.Join(pl.Recipe.Dir(), p)
				}
				tr.Overrides[name] = p
			}
			if tc.Python != "" {
				tr.Python = tc.Python
			}
		}
	}
	return tr
}

// dataResolver resolves builtin:NAME to the text shipped in the binary
// (written once into the cache) and anything else to a path relative to
// the recipe.
func dataResolver(cacheRoot, recipeDir string) func(ref string) (string, error) {
	return func(ref string) (string, error) {
		if name, ok := strings.CutPrefix(ref, "builtin:"); ok {
			return data.Materialize(name, filepath.Join(cacheRoot, "data"))
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
