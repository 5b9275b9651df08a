package cli

import (
	"cmp"
	"context"
	"io"

	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/rayexec"
	"github.com/spf13/pflag"
)

// registerRay adds run's --engine flags; start connects the engine to Ray
// when --engine ray (stop disconnects, canceling what still runs).
func registerRay(fs *pflag.FlagSet, env *Env) func(ctx context.Context, env *Env, c *common, eng *engine.Engine, pl *plan.Plan, recipe, cacheRoot string, targets []string) (stop func(), err error) {
	kind := fs.String("engine", "local", "where steps run: local, or ray (each step a Ray task running `edgepipe step run` on a worker; needs --ray-address and --remote-cache)")
	cfg := rayexec.Config{}
	fs.StringVar(&cfg.Address, "ray-address", env.Getenv("RAY_ADDRESS"), "the Ray cluster (`HOST:PORT` of its head, or ray://HOST:PORT for Ray Client; env RAY_ADDRESS)")
	fs.StringVar(&cfg.Edgepipe, "ray-edgepipe", "edgepipe", "the edgepipe command on the Ray workers (on their PATH, or a path every node has)")
	fs.IntVar(&cfg.Retries, "ray-retries", 2, "times Ray reruns a step whose worker or node died (a step that failed is not rerun)")
	return func(ctx context.Context, env *Env, c *common, eng *engine.Engine, pl *plan.Plan, recipe, cacheRoot string, targets []string) (func(), error) {
		switch {
		case *kind == "local":
			return func() {}, nil
		case *kind != "ray":
			return nil, usageErr("--engine must be local or ray, not %q", *kind)
		case cfg.Address == "":
			return nil, usageErr("--engine ray needs --ray-address HOST:PORT (or RAY_ADDRESS): `go tool task ray:cluster` starts a local cluster and prints it")
		case c.store == nil || !c.store.Mode().Reads():
			return nil, usageErr("--engine ray needs --remote-cache URL in read or readwrite mode: the workers' outputs come back through it")
		}
		bundle, cleanup, err := c.tempBundle(ctx, env, pl, recipe, targets, eng.CacheStatus(ctx))
		if err != nil {
			return nil, err
		}
		cfg.RemoteCache, cfg.CacheRoot, cfg.Bundle, cfg.Log = c.remote.URL, cacheRoot, bundle, env.toolOutput()
		if c.json || c.quiet {
			cfg.Log = io.Discard
		}
		x, cpus, disconnect, err := rayexec.Connect(ctx, cfg)
		if err != nil {
			cleanup()
			return nil, runFailure(ctx, err)
		}
		eng.SetDispatcher(x, cmp.Or(c.jobs, cpus))
		return func() { disconnect(); cleanup() }, nil
	}
}
