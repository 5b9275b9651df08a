package cli

import (
	"context"
	"os"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/argo"
	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/spf13/pflag"
)

// cmdExport prints a recipe's plan for another engine: `export argo`.
func cmdExport(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, false)
	targets := targetFlag(fs)
	image := fs.String("image", "edgepipe:latest", "the container image each step runs in (`IMG`: edgepipe on PATH, and the toolchains its steps need)")
	secret := fs.String("secret", "edgepipe-remote-cache", "a Kubernetes Secret whose keys become every pod's environment (`NAME`: the remote cache's AWS_* credentials, EDGEPIPE_SIGNING_KEY); optional at run time")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 2 || pos[0] != "argo" {
			return usageErr("usage: edgepipe export argo [--image IMG] --remote-cache URL [--target NAME] RECIPE")
		}
		if c.remote.URL == "" {
			return usageErr("export argo needs --remote-cache URL (or EDGEPIPE_REMOTE_CACHE): each step runs in its own pod, and the pods share outputs only through it")
		}
		pl, err := loadPlan(pos[1])
		if err != nil {
			return err
		}
		_, _ = openLock(pos[1], pl, false, false)
		if pl, err = selectTargets(pl, *targets); err != nil {
			return err
		}
		eng, _, _, err := c.engine(ctx, env, pl, nil)
		if err != nil {
			return err
		}
		// Weights from the model's size: fetched here, else estimated from
		// its shape (parameters x 2 bytes, a 16-bit checkpoint).
		m := edge.ResolveModel(pl.Recipe.Model.Source, pl.Recipe.Dir())
		pred := eng.PredictAssuming(ctx, m.Shape.Params*2)
		abs, _ := filepath.Abs(pos[1])
		pj, err := plan.Save(pl, abs, nil) // every step a miss: pods start with empty caches
		if err != nil {
			return err
		}
		pj.Targets = *targets
		dir, err := os.MkdirTemp("", "edgepipe-export-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bundlePath := filepath.Join(dir, "plan.bundle")
		if err := c.writeBundle(ctx, env, pl, pos[1], pj, bundlePath); err != nil {
			return err
		}
		b, err := boundedfile.Read(bundlePath, argo.MaxBundleBytes)
		if err != nil {
			return usageErr("the plan bundle: %v", err)
		}
		out, err := argo.Export(argo.Options{Recipe: pl.Recipe.Name, Image: *image, RemoteCache: c.remote.URL,
			Secret: *secret, Bundle: b, Steps: argo.StepsFrom(pl, pred)})
		if err != nil {
			return usageErr("%v", err)
		}
		_, err = env.Stdout.Write(out)
		return err
	}
}
