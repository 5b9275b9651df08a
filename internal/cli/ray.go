package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/rayexec"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/spf13/pflag"
)

// rayFlags are run's --engine ray flags.
type rayFlags struct {
	engine, address, edgepipe string
	retries                   int
}

func registerRay(fs *pflag.FlagSet, env *Env) *rayFlags {
	r := &rayFlags{}
	fs.StringVar(&r.engine, "engine", "local", "where steps run: local, or ray (each step a Ray task running `edgepipe step run` on a worker; needs --ray-address and --remote-cache)")
	fs.StringVar(&r.address, "ray-address", env.Getenv("RAY_ADDRESS"), "the Ray cluster (`HOST:PORT` of its head, or ray://HOST:PORT for Ray Client; env RAY_ADDRESS)")
	fs.StringVar(&r.edgepipe, "ray-edgepipe", "edgepipe", "the edgepipe command on the Ray workers (on their PATH, or a path every node has)")
	fs.IntVar(&r.retries, "ray-retries", 2, "times Ray reruns a step whose worker or node died (a step that failed is not rerun)")
	return r
}

// start connects the engine to Ray when --engine ray: it writes the
// plan's bundle, starts the bridge and makes Ray run the steps that miss
// both caches. stop disconnects (canceling what still runs).
func (r *rayFlags) start(ctx context.Context, env *Env, c *common, eng *engine.Engine, pl *plan.Plan, recipePath, cacheRoot string, targets []string) (stop func(), err error) {
	switch r.engine {
	case "local":
		return func() {}, nil
	case "ray":
	default:
		return nil, usageErr("--engine must be local or ray, not %q", r.engine)
	}
	if r.address == "" {
		return nil, usageErr("--engine ray needs --ray-address HOST:PORT (or RAY_ADDRESS): `go tool task ray:cluster` starts a local cluster and prints it")
	}
	if c.store == nil || !c.store.Mode().Reads() {
		return nil, usageErr("--engine ray needs --remote-cache URL in read or readwrite mode: the workers' outputs come back through it")
	}
	needs := toolchain.NeededNames(cacheRoot, rayexec.Toolchain)
	if err := toolchain.Ensure(ctx, cacheRoot, needs, true, "edgepipe toolchain install "+rayexec.Toolchain, env.Stderr); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &ExitError{Code: ExitStepFailed, Err: err}
	}
	argv, _, _, _, err := toolchain.FindTool(cacheRoot, rayexec.ToolBridge)
	if err != nil {
		return nil, &ExitError{Code: ExitStepFailed, Err: err}
	}
	dir, err := os.MkdirTemp("", "edgepipe-ray-")
	if err != nil {
		return nil, err
	}
	bundlePath := filepath.Join(dir, "plan.bundle")
	abs, _ := filepath.Abs(recipePath)
	pj, err := plan.Save(pl, abs, eng.CacheStatus(ctx))
	if err == nil {
		pj.Targets = targets
		err = c.writeBundle(ctx, env, pl, recipePath, pj, bundlePath)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	b, err := rayexec.Start(ctx, argv, r.address, bundlePath, os.Environ())
	if err != nil {
		os.RemoveAll(dir)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &ExitError{Code: ExitStepFailed, Err: fmt.Errorf("--engine ray: %w", err)}
	}
	if !c.json && !c.quiet {
		fmt.Fprintf(env.Stderr, "ray: %d nodes, %g CPUs at %s; steps run there, outputs come back through %s\n",
			b.Ready.Nodes, b.Ready.CPUs, r.address, c.remote.URL)
	}
	jobs := c.jobs
	if jobs == 0 {
		jobs = max(int(b.Ready.CPUs), 1)
	}
	eng.SetDispatcher(&rayexec.Executor{Bridge: b, Edgepipe: r.edgepipe, RemoteCache: c.remote.URL, MaxRetries: r.retries}, jobs)
	return func() {
		b.Close()
		os.RemoveAll(dir)
	}, nil
}
