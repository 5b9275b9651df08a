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
	o := argo.Options{}
	fs.StringVar(&o.Image, "image", "edgepipe:latest", "the container image each step runs in (`IMG`: edgepipe on PATH, and the toolchains its steps need)")
	fs.StringVar(&o.Secret, "secret", "edgepipe-remote-cache", "a Kubernetes Secret whose keys become every pod's environment (`NAME`: the remote cache's AWS_* credentials, EDGEPIPE_SIGNING_KEY); optional at run time")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 2 || pos[0] != "argo" {
			return subcommandErr("export", pos, []string{"argo"}, "usage: edgepipe export argo [--image IMG] --remote-cache URL [--target NAME] RECIPE")
		}
		if c.json {
			return noJSON("export argo (it prints a workflow in YAML)", "plan, whose --json lists the steps the workflow runs")
		}
		if o.RemoteCache = c.remote.URL; o.RemoteCache == "" {
			return usageErr("export argo needs --remote-cache URL (or EDGEPIPE_REMOTE_CACHE): each step runs in its own pod, and the pods share outputs only through it")
		}
		if err := o.Check(); err != nil {
			return usageErr("%v", err)
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
		// Every step a miss (pods start with empty caches); weights from
		// the model's size, else its shape (parameters x 2 bytes).
		path, cleanup, err := c.tempBundle(ctx, env, pl, pos[1], *targets, nil)
		if err != nil {
			return err
		}
		defer cleanup()
		if o.Bundle, err = boundedfile.Read(path, argo.MaxBundleBytes); err != nil {
			return usageErr("the plan bundle: %v", err)
		}
		m := edge.ResolveModel(pl.Recipe.Model.Source, pl.Recipe.Dir())
		o.Recipe, o.Steps = pl.Recipe.Name, argo.StepsFrom(pl, eng.PredictAssuming(ctx, m.Shape.Params*2))
		out, err := argo.Export(o)
		if err != nil {
			return usageErr("%v", err)
		}
		_, err = env.Stdout.Write(out)
		return err
	}
}

// tempBundle writes the plan's bundle (`plan --bundle`) into a temporary
// folder that cleanup removes.
func (c *common) tempBundle(ctx context.Context, env *Env, pl *plan.Plan, recipe string, targets []string, status map[string]string) (string, func(), error) {
	abs, _ := filepath.Abs(recipe)
	pj, err := plan.Save(pl, abs, status)
	if err != nil {
		return "", nil, err
	}
	pj.Targets = targets
	dir, err := os.MkdirTemp("", "edgepipe-bundle-")
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "plan.bundle")
	if err := c.writeBundle(ctx, env, pl, recipe, pj, path); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// runFailure is err as a failed run (exit 1), or the interruption.
func runFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &ExitError{Code: ExitStepFailed, Err: err}
}
