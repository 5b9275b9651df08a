package cli

import (
	"errors"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/toolchain"

	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/tools"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/steps"
)

// loadPlan parses, validates and expands a recipe; every problem found is
// reported at once, with its place in the file.
func loadPlan(path string) (*plan.Plan, error) {
	if path == "" {
		return nil, usageErr("name a recipe file, e.g. edgepipe run recipes/demo.yaml")
	}
	if err := recipeFile(path); err != nil {
		return nil, err
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
	if len(pl.Preflight) > 0 {
		return nil, pl.Preflight
	}
	return pl, nil
}

// loadLocalPlan is loadPlan for the commands that run or check a recipe
// on this machine (validate, plan, run): a local model source must be
// here too. `step run` does not ask, since a worker takes the source
// step's output from the remote cache and need not hold the folder.
func loadLocalPlan(path string) (*plan.Plan, error) {
	pl, err := loadPlan(path)
	if err != nil {
		return nil, err
	}
	if diags := edge.MissingLocalSource(pl.Recipe); len(diags) > 0 {
		return nil, diags
	}
	return pl, nil
}

// cacheDir is --cache-dir, else EDGEPIPE_CACHE, else the user cache folder.
func (c *common) cacheRoot(env *Env) (string, error) {
	if c.cacheDir != "" {
		return filepath.Abs(c.cacheDir)
	}
	root, err := cache.UserRoot(env.Getenv)
	if err != nil {
		return "", fmt.Errorf("no cache folder: set --cache-dir or EDGEPIPE_CACHE")
	}
	return root, nil
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

// toolResolver builds the tool resolver: recipe overrides, then
// --tool-path, then the installed toolchains.
func (c *common) toolResolver(pl *plan.Plan, cacheRoot string) *tools.Resolver {
	var r *recipe.Recipe
	if pl != nil {
		r = pl.Recipe
	}
	return tools.ForRecipe(r, c.toolPath, toolchain.Finder{CacheRoot: cacheRoot})
}

// recipeFile refuses, as a usage error, a recipe path that is not a
// regular file: missing, a folder, a device or a pipe (which would block).
func recipeFile(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usageErr("recipe %s does not exist: check the path (recipes/ holds the examples)", path)
	case err != nil:
		return usageErr("recipe %s: %v", path, err)
	case st.IsDir():
		return usageErr("%s is a folder: name the recipe file in it (e.g. %s)", path, filepath.Join(path, "demo.yaml"))
	case !st.Mode().IsRegular():
		return usageErr("recipe %s is not a regular file: give a YAML file", path)
	case st.Size() > boundedfile.RecipeLimit:
		return usageErr("recipe %s is %d bytes, over the %d MiB a recipe may be: check that it is the recipe you meant", path, st.Size(), boundedfile.RecipeLimit>>20)
	}
	return nil
}

// checkOutDir refuses an output folder publishing must not write into,
// before any step runs: the file system root, a file, the model's own
// source folder (each publish would change the model's digest, and a
// target named like one of its files would replace it), or a folder at
// or inside the cache (edgepipe's to manage: `cache gc` deletes what is
// old in its areas, and a published folder there would go with it). A
// cache inside a target's folder is refused too: each publish replaces
// that folder whole. A cache elsewhere inside --out is left alone by both.
func checkOutDir(out, cacheRoot string, r *recipe.Recipe) error {
	if filepath.Dir(out) == out {
		return usageErr("--out %s is the root of the file system: give a folder of its own, e.g. --out artifacts", out)
	}
	if st, err := os.Stat(out); err == nil && !st.IsDir() {
		return usageErr("--out %s is a file: give a folder (it is created if missing)", out)
	}
	realOut, realCache := resolved(out), resolved(cacheRoot)
	if within(realOut, realCache) {
		return usageErr("--out %s is inside the cache folder %s, which edgepipe manages (`edgepipe cache gc` deletes in it): publish somewhere else, e.g. --out artifacts", out, cacheRoot)
	}
	for _, t := range r.Targets {
		if dir := filepath.Join(realOut, t.Name); within(realCache, dir) {
			return usageErr("the cache folder %s is inside %s, where target %s is published, and each publish replaces that folder: publish somewhere else with --out DIR, or move the cache (--cache-dir, EDGEPIPE_CACHE)", cacheRoot, filepath.Join(out, t.Name), t.Name)
		}
	}
	if shared.IsLocalSource(r.Model.Source) {
		src := r.Model.Source
		if !filepath.IsAbs(src) {
			src = filepath.Join(r.Dir(), src)
		}
		if abs, err := filepath.Abs(src); err == nil {
			if rel, err := filepath.Rel(abs, out); err == nil && filepath.IsLocal(rel) {
				return usageErr("--out %s is inside the model's source folder %s: publish somewhere else, e.g. --out artifacts", out, abs)
			}
		}
	}
	return nil
}

// checkOutput refuses an output path (flag names it) that holds anything
// but a regular file: a device, a FIFO or a folder would be replaced by
// the rename that writes the output. "" (no output asked for) passes.
func checkOutput(flag, path string) error {
	if path == "" {
		return nil
	}
	if err := atomicfile.CheckReplaceable(path); err != nil {
		return usageErr("%s: %v", flag, err)
	}
	return nil
}

// within reports whether path is dir or inside it; both are absolute and
// clean.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// resolved is an absolute path with the links in its existing part
// resolved, so that a link cannot hide one folder inside another.
func resolved(p string) string {
	p = filepath.Clean(p)
	var rest []string
	for cur := p; ; cur = filepath.Dir(cur) {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		if filepath.Dir(cur) == cur {
			return p
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
	}
}
