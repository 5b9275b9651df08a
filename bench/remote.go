package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/edgepipe/edgepipe/bench/benchdata"
	"github.com/edgepipe/edgepipe/internal/benchstat"
	"github.com/edgepipe/edgepipe/internal/testseaweed"
)

var remoteCacheBench = benchmark{
	name: "remote-cache",
	about: func(e *env) string {
		return fmt.Sprintf("a recipe on the stand-in tools (%s model) from an empty local cache with a warm remote cache (SeaweedFS S3 on loopback) "+
			"vs the same run cold with no remote and a warm local rerun; ratio = remote-warm / cold", fmtBytes(remoteModelBytes))
	},
	run: runRemoteCache,
}

const remoteModelBytes = 64 << 20 // the stand-in model's weights

var remoteSummaryRE = regexp.MustCompile(`(\d+) hits, (\d+) misses, \d+ rejected; downloaded (\d+) objects \((\d+) bytes\)`)

func runRemoteCache(ctx context.Context, e *env) (result, error) {
	res := result{}
	weed, err := testseaweed.Weed()
	if err != nil {
		res.skipped = "SeaweedFS is not installed: edgepipe toolchain install seaweedfs"
		return res, nil
	}
	dir, err := e.workdir("remote")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if err := writeTinyProject(dir, "remote", "  laptop-q4:\n    device: x86-laptop\n    format: gguf-q4_0\n"); err != nil {
		return res, err
	}
	if err := benchdata.WriteRandom(ctx, filepath.Join(dir, "model", "model.safetensors"), remoteModelBytes, 7); err != nil {
		return res, err
	}
	srv, err := testseaweed.Start(ctx, weed, dir) // data under dir/data
	if err != nil {
		return res, err
	}
	defer srv.Close()
	n := 0 // caches made so far
	edgepipe := func(remote string, freshCache bool, extra ...string) command {
		n += map[bool]int{true: 1}[freshCache]
		env := append(e.standinEnv(filepath.Join(dir, fmt.Sprintf("cache%d", n))), srv.Writer.Env()...)
		env = append(env, "AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent")
		argv := []string{e.edgepipe, "run", "--out", filepath.Join(dir, "out", strconv.Itoa(n))}
		if remote != "" {
			argv = append(argv, "--remote-cache", srv.URL(remote))
		}
		return command{argv: append(append(argv, extra...), "recipe.yaml"), dir: dir, env: env}
	}
	var cold, warm, remote, down, objects, hits = []time.Duration{}, []time.Duration{}, []time.Duration{}, []int64{}, []int64{}, []int64{}
	for i := range e.slowReps {
		e.logf("remote-cache: round %d of %d", i+1, e.slowReps)
		if _, err := mustSucceed(ctx, edgepipe(fmt.Sprint("r", i), true, "--remote-cache-mode", "write")); err != nil { // fills the remote, not timed
			return res, err
		}
		settle()
		m, err := mustSucceed(ctx, edgepipe("", true))
		if err != nil {
			return res, err
		}
		cold = append(cold, m.wall)
		if m, err = mustSucceed(ctx, edgepipe("", false)); err != nil {
			return res, err
		}
		warm = append(warm, m.wall)
		if m, err = mustSucceed(ctx, edgepipe(fmt.Sprint("r", i), true, "--remote-cache-mode", "read")); err != nil {
			return res, err
		}
		remote = append(remote, m.wall)
		sm := remoteSummaryRE.FindSubmatch(m.stderr)
		if sm == nil || string(sm[2]) != "0" {
			return res, fmt.Errorf("the warm-remote run was not all remote hits:\n%s", m.errorText())
		}
		hits, objects, down = append(hits, parseCount(sm[1])), append(objects, parseCount(sm[3])), append(down, parseCount(sm[4]))
	}
	res.add("tools", "stand-ins")
	res.add("cold_s", benchstat.Median(cold))
	res.add("warm_local_s", benchstat.Median(warm))
	res.add("warm_remote_s", benchstat.Median(remote))
	res.add("remote_hits", benchstat.Median(hits))
	res.add("remote_objects", benchstat.Median(objects))
	res.add("remote_bytes", fmtBytes(benchstat.Median(down)))
	res.add("remote_vs_warm_local", benchstat.Median(remote).Seconds()/benchstat.Median(warm).Seconds())
	res.ratio = benchstat.Median(remote).Seconds() / benchstat.Median(cold).Seconds()
	return res, nil
}

func parseCount(b []byte) int64 { n, _ := strconv.ParseInt(string(b), 10, 64); return n }
