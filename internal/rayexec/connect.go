package rayexec

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// Config is how `run --engine ray` reaches a cluster.
type Config struct {
	Address     string // HOST:PORT of the head, or ray://HOST:PORT
	Edgepipe    string // edgepipe on the workers
	Retries     int    // Ray's max_retries for a lost worker or node
	RemoteCache string // the URL workers share outputs through
	CacheRoot   string // this machine's cache (the ray toolchain)
	Bundle      string // the plan bundle to ship to the workers
	// Log receives what the connection says (installs, the cluster's
	// size); nil: nothing.
	Log io.Writer
}

// Connect installs the ray toolchain when it is missing, starts the bridge
// and returns the executor with the cluster's CPUs (the steps worth
// keeping in flight). close disconnects, canceling what still runs.
func Connect(ctx context.Context, c Config) (x *Executor, cpus int, close func(), err error) {
	log := c.Log
	if log == nil {
		log = io.Discard
	}
	needs := toolchain.NeededNames(c.CacheRoot, Toolchain)
	if err := toolchain.Ensure(ctx, c.CacheRoot, needs, true, "edgepipe toolchain install "+Toolchain, log); err != nil {
		return nil, 0, nil, err
	}
	argv, _, _, _, err := toolchain.FindTool(c.CacheRoot, ToolBridge)
	if err != nil {
		return nil, 0, nil, err
	}
	b, err := Start(ctx, argv, c.Address, c.Bundle, os.Environ())
	if err != nil {
		return nil, 0, nil, fmt.Errorf("--engine ray: %w", err)
	}
	fmt.Fprintf(log, "ray: %d nodes, %g CPUs at %s; steps run there, outputs come back through %s\n",
		b.Ready.Nodes, b.Ready.CPUs, c.Address, c.RemoteCache)
	x = &Executor{Bridge: b, Edgepipe: c.Edgepipe, RemoteCache: c.RemoteCache, MaxRetries: c.Retries}
	return x, max(int(b.Ready.CPUs), 1), func() { b.Close() }, nil
}
