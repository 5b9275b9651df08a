package cli

import (
	"context"
	"os"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/argo"
	"github.com/edgepipe/edgepipe/internal/bundle"
	"github.com/edgepipe/edgepipe/internal/plan"
)

// writeBundle writes `plan --bundle FILE`: the saved plan with the recipe,
// its lock and the local files its steps read (large ones through the
// remote cache, by digest).
func (c *common) writeBundle(ctx context.Context, env *Env, pl *plan.Plan, recipePath string, pj *plan.Saved, out string) error {
	root, err := c.cacheRoot(env)
	if err != nil {
		return err
	}
	files, err := bundle.LocalFiles(pl, data.Resolver(root, pl.Recipe.Dir()))
	if err != nil {
		return usageErr("plan --bundle: %v", err)
	}
	var blobs bundle.Blobs
	if c.store != nil {
		blobs = c.store
	}
	return bundle.Write(ctx, out, pj, recipePath, files, blobs, bundle.DefaultEmbedLimit)
}

// openSaved reads a plan saved by `plan --json`, or unpacks a bundle into
// a temporary folder (removed by cleanup) and reads its plan. A relative
// recipe path is relative to the plan's folder.
func (c *common) openSaved(ctx context.Context, path string) (*plan.Saved, func(), error) {
	cleanup := func() {}
	// A bundle that came as text (an Argo raw artifact) is decoded first.
	if p, err := argo.DearmorFile(path); err != nil {
		return nil, cleanup, err
	} else if p != path {
		path, cleanup = p, func() { os.Remove(p) }
	}
	if bundle.IsBundle(path) {
		dir, err := os.MkdirTemp("", "edgepipe-bundle-")
		if err != nil {
			return nil, cleanup, err
		}
		undo := cleanup
		cleanup = func() { os.RemoveAll(dir); undo() }
		store, err := c.remote.Open(ctx, nil, Version)
		if err != nil {
			return nil, cleanup, usageErr("%v", err)
		}
		var blobs bundle.Blobs
		if store != nil {
			blobs = store
		}
		if path, err = bundle.Extract(ctx, path, dir, blobs); err != nil {
			return nil, cleanup, usageErr("%v", err)
		}
	}
	pj, err := plan.ReadSaved(path)
	if err != nil {
		return nil, cleanup, usageErr("%v", err)
	}
	return pj, cleanup, nil
}
