// Command raycluster starts, for a person trying `edgepipe run --engine
// ray` on one machine, what the real tests start: a 3-node Ray cluster on
// 127.0.0.1 (a head and two workers, each with its own edgepipe cache and
// the machine's installed toolchains linked in) and a SeaweedFS S3 bucket
// on 127.0.0.1 as the remote cache. It prints the commands to use them and
// stops both on Ctrl-C or SIGTERM. Run it with `go tool task ray:cluster`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/edgepipe/edgepipe/internal/rayexec"
	"github.com/edgepipe/edgepipe/internal/testray"
	"github.com/edgepipe/edgepipe/internal/testseaweed"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "raycluster:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := os.Getenv("EDGEPIPE_CACHE")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "edgepipe")
	}
	if err := toolchain.Ensure(ctx, root, toolchain.NeededNames(root, rayexec.Toolchain, toolchain.SeaweedFS), true,
		"edgepipe toolchain install ray seaweedfs", os.Stderr); err != nil {
		return err
	}
	py, err := testray.Python(root)
	if err != nil {
		return err
	}
	weed, err := testseaweed.Weed()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "edgepipe-raycluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	srv, err := testseaweed.Start(ctx, weed, work) // its data under work/data
	if err != nil {
		return err
	}
	defer srv.Close()
	bin, _ := filepath.Abs("bin")
	var envs []map[string]string
	for i := range 3 {
		cache := filepath.Join(work, fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return err
		}
		// Installed software, like a node image: the toolchains. The step
		// cache is the node's own.
		if err := os.Symlink(filepath.Join(root, "toolchains"), filepath.Join(cache, "toolchains")); err != nil {
			return err
		}
		env := map[string]string{"EDGEPIPE_CACHE": cache, "PATH": bin + ":" + os.Getenv("PATH"),
			"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
		for _, kv := range srv.Writer.Env() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		envs = append(envs, env)
	}
	cluster, err := testray.Start(ctx, py, testray.Options{NodeEnv: envs, CPUs: 2, HeadCPUs: -1, TempDir: filepath.Join(work, "ray")})
	if err != nil {
		return err
	}
	defer cluster.Close()
	creds := filepath.Join(work, "s3.env")
	if err := os.WriteFile(creds, []byte("export "+strings.Join(srv.Writer.Env(), "\nexport ")+"\nexport AWS_EC2_METADATA_DISABLED=true\n"), 0o600); err != nil {
		return err
	}
	fmt.Printf(`A local Ray cluster: 3 nodes on 127.0.0.1 (each with its own edgepipe cache under %s),
and a SeaweedFS S3 bucket on 127.0.0.1 as the remote cache.

In another shell, from the repository root:
  . %s      # the bucket's credentials (local and temporary)
  bin/edgepipe run --engine ray --ray-address %s \
      --remote-cache %s --ray-edgepipe %s/edgepipe recipes/demo.yaml

Ctrl-C here stops the cluster and the bucket and removes their files.
`, work, creds, cluster.Address, srv.URL("cache"), bin)
	<-ctx.Done()
	fmt.Println("stopping the cluster and the bucket")
	stopped := make(chan struct{})
	go func() { cluster.Close(); srv.Close(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(45 * time.Second):
	}
	return nil
}
