// Package testray runs a local Ray cluster on loopback for tests,
// benchmarks and `go tool task ray:cluster`: ray_local_cluster.py (beside this file)
// in edgepipe's pinned ray toolchain, a head and worker nodes each with an
// environment of its own (its own EDGEPIPE_CACHE), all in one process
// group that Close ends.
package testray

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/edgepipe/edgepipe/internal/rayexec"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// localClusterScript starts the nodes and reports when they are up.
//
//go:embed ray_local_cluster.py
var localClusterScript []byte

// Cluster is a running local cluster.
type Cluster struct {
	Address string // 127.0.0.1:PORT, for --ray-address
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	out     *bufio.Scanner
	log     string
	short   string // Ray's temp dir
}

// Options size the cluster.
type Options struct {
	// NodeEnv is each node's environment overrides, the head first; its
	// length is the number of nodes.
	NodeEnv  []map[string]string
	CPUs     int // each worker's CPUs
	HeadCPUs int // the head's; -1: the same as the workers'
	TempDir  string
}

// Python finds the ray toolchain's interpreter in the edgepipe cache at
// root (EDGEPIPE_CACHE's).
func Python(root string) (string, error) {
	in, err := toolchain.Resolve(root, rayexec.Toolchain)
	if err != nil {
		return "", err
	}
	return in.Python, nil
}

// Start starts the cluster and returns once every node is up.
func Start(ctx context.Context, pythonBin string, o Options) (*Cluster, error) {
	script := filepath.Join(o.TempDir, "ray_local_cluster.py")
	if err := os.MkdirAll(o.TempDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(script, localClusterScript, 0o644); err != nil {
		return nil, err
	}
	// Ray's sockets live under its temp dir, and a Unix socket path is
	// at most 107 bytes: a short folder of its own.
	short, err := os.MkdirTemp("", "epray")
	if err != nil {
		return nil, err
	}
	args := []string{script, "--temp-dir", short, "--cpus", fmt.Sprint(max(o.CPUs, 1))}
	if o.HeadCPUs >= 0 {
		args = append(args, "--head-cpus", fmt.Sprint(o.HeadCPUs))
	}
	for _, env := range o.NodeEnv {
		j, _ := json.Marshal(env)
		args = append(args, "--node-env", string(j))
	}
	c := &Cluster{cmd: exec.Command(pythonBin, args...), log: filepath.Join(o.TempDir, "cluster.log"), short: short}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(c.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	c.cmd.Stderr = logf
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	c.out = bufio.NewScanner(stdout)
	up := make(chan error, 1)
	go func() {
		var first struct{ Address string }
		if !c.out.Scan() {
			up <- errors.New("the cluster exited before it was up")
			return
		}
		up <- json.Unmarshal(c.out.Bytes(), &first)
		c.Address = first.Address
	}()
	select {
	case err = <-up:
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(5 * time.Minute):
		err = errors.New("the cluster did not come up within 5 minutes")
	}
	if err != nil || !strings.HasPrefix(c.Address, "127.0.0.1:") {
		c.Close()
		tail, _ := os.ReadFile(c.log)
		return nil, fmt.Errorf("start a local Ray cluster (address %q): %v\n%s", c.Address, err, lastBytes(tail, 4000))
	}
	return c, nil
}

// Kill kills worker node i (1, 2, ...) at once, like a lost machine.
func (c *Cluster) Kill(i int) error {
	if _, err := fmt.Fprintf(c.stdin, "kill %d\n", i); err != nil {
		return err
	}
	if !c.out.Scan() {
		return errors.New("the cluster exited")
	}
	var r struct {
		Killed *int
		Error  string
	}
	if err := json.Unmarshal(c.out.Bytes(), &r); err != nil || r.Killed == nil {
		return fmt.Errorf("kill node %d: %s %v", i, r.Error, err)
	}
	return nil
}

// Pgid is the process group every process of the cluster is in.
func (c *Cluster) Pgid() int { return c.cmd.Process.Pid }

// Close shuts the cluster down (gracefully for 30 s, then SIGKILL to its
// whole process group).
func (c *Cluster) Close() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-done
	os.RemoveAll(c.short)
}

func lastBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// NodeEnvs makes n node environments under dir: each node's own empty
// edgepipe cache (nodeN) with the named folders of the machine's cache at
// root linked in (toolchains, models: installed software, as on a node
// image), plus the variables in extra (KEY=VALUE).
func NodeEnvs(dir, root string, n int, links, extra []string) ([]map[string]string, error) {
	var envs []map[string]string
	for i := range n {
		cache, err := FreshCache(filepath.Join(dir, fmt.Sprintf("node%d", i)), root, links...)
		if err != nil {
			return nil, err
		}
		env := map[string]string{"EDGEPIPE_CACHE": cache}
		for _, kv := range extra {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		envs = append(envs, env)
	}
	return envs, nil
}

// FreshCache makes an empty edgepipe cache at dir with the named folders
// of the cache at root linked in.
func FreshCache(dir, root string, links ...string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, l := range links {
		if err := os.Symlink(filepath.Join(root, l), filepath.Join(dir, l)); err != nil && !os.IsExist(err) {
			return "", err
		}
	}
	return dir, nil
}
