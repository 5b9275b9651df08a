package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/testray"
	"github.com/edgepipe/edgepipe/internal/testseaweed"
)

var rayBench = benchmark{
	name: "ray",
	about: func(*env) string {
		return "recipes/demo.yaml (real tools; the stand-in tiny recipe when the demo's toolchains are missing) from empty caches: " +
			"-j 2 locally vs `--engine ray` on a local 3-node Ray cluster (127.0.0.1, a head and two 2-CPU workers, each its own cache, " +
			"sharing through SeaweedFS); ratio = ray / local wall time; per-step overhead = mean of (step time on Ray - step time locally)"
	},
	run: runRay,
}

func runRay(ctx context.Context, e *env) (result, error) {
	res := result{}
	weed, err := testseaweed.Weed()
	if err != nil {
		res.skipped = "SeaweedFS is not installed: edgepipe toolchain install seaweedfs"
		return res, nil
	}
	root := os.Getenv("EDGEPIPE_CACHE")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "edgepipe")
	}
	py, err := testray.Python(root)
	if err != nil {
		res.skipped = "the ray toolchain is not installed: edgepipe toolchain install ray"
		return res, nil
	}
	dir, err := e.workdir("ray")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	recipe, toolEnv := filepath.Join(e.root, "recipes", "demo.yaml"), []string{}
	tools := "real (recipes/demo.yaml)"
	if why, err := e.toolchainsMissing(ctx, demoToolchains); err != nil || why != "" {
		tools = "stand-ins (tiny recipe): " + why
		if err := writeTinyProject(dir, "raybench", "  laptop-q4:\n    device: x86-laptop\n    format: gguf-q4_0\n"); err != nil {
			return res, err
		}
		recipe, toolEnv = filepath.Join(dir, "recipe.yaml"), []string{"EDGEPIPE_TOOL_PATH=" + e.standins}
	}
	srv, err := testseaweed.Start(ctx, weed, filepath.Join(dir, "s3"))
	if err != nil {
		return res, err
	}
	defer srv.Close()
	s3env := append(srv.Writer.Env(), "AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent")
	// A fresh cache with the machine's toolchains linked in: installed
	// software, as on a node image; the step cache starts empty.
	cache := func(name string) (string, error) {
		c := filepath.Join(dir, name)
		if err := os.MkdirAll(c, 0o755); err != nil {
			return "", err
		}
		return c, os.Symlink(filepath.Join(root, "toolchains"), filepath.Join(c, "toolchains"))
	}
	var envs []map[string]string
	for i := range 3 {
		c, err := cache(fmt.Sprintf("node%d", i))
		if err != nil {
			return res, err
		}
		env := map[string]string{"EDGEPIPE_CACHE": c}
		for _, kv := range append(s3env, toolEnv...) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		envs = append(envs, env)
	}
	started := time.Now()
	cluster, err := testray.Start(ctx, py, testray.Options{NodeEnv: envs, CPUs: 2, HeadCPUs: 0, TempDir: filepath.Join(dir, "ray")})
	if err != nil {
		return res, err
	}
	defer cluster.Close()
	e.logf("ray: cluster up in %s", time.Since(started).Round(time.Second))
	run := func(name string, extra ...string) (measurement, map[string]float64, error) {
		c, err := cache(name)
		if err != nil {
			return measurement{}, nil, err
		}
		argv := append([]string{e.edgepipe, "run", "--json", "--out", filepath.Join(dir, "out-"+name)}, extra...)
		m, err := mustSucceed(ctx, command{argv: append(argv, recipe), dir: dir,
			env: append(append([]string{"EDGEPIPE_CACHE=" + c}, toolEnv...), s3env...)})
		return m, stepSeconds(m.stdout), err
	}
	e.logf("ray: the recipe locally at -j 2")
	local, localSteps, err := run("local", "-j", "2")
	if err != nil {
		return res, err
	}
	e.logf("ray: the recipe on the cluster")
	ray, raySteps, err := run("ray", "--engine", "ray", "--ray-address", cluster.Address, "--ray-edgepipe", e.edgepipe,
		"--remote-cache", srv.URL("bench"))
	if err != nil {
		return res, err
	}
	var over []float64
	for id, s := range raySteps {
		if l, ok := localSteps[id]; ok {
			over = append(over, s-l)
		}
	}
	mean := 0.0
	for _, o := range over {
		mean += o / float64(len(over))
	}
	res.add("tools", tools)
	res.add("local_j2_s", local.wall)
	res.add("ray_3_nodes_s", ray.wall)
	res.add("steps_on_ray", fmt.Sprint(len(raySteps)))
	res.add("overhead_per_step_s", mean)
	res.ratio = ray.wall.Seconds() / local.wall.Seconds()
	return res, nil
}

// stepSeconds are the durations of the steps that ran, from a --json
// run's step-finished events.
func stepSeconds(stdout []byte) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var ev event.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == event.Finished && ev.Kind != "publish" {
			out[ev.Step] = ev.Seconds
		}
	}
	return out
}
