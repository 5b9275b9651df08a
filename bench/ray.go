package main

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/testray"
	"github.com/edgepipe/edgepipe/internal/testseaweed"
)

var rayBench = benchmark{
	name: "ray",
	about: func(*env) string {
		return "recipes/demo.yaml (the stand-in tiny recipe when the demo's toolchains are missing) from empty caches: -j 2 locally vs " +
			"--engine ray on a local 3-node Ray cluster (127.0.0.1: a head that schedules, two 2-CPU workers, each its own cache, sharing " +
			"through SeaweedFS); ratio = ray / local wall time; overhead_per_step_s = mean of (a step's time on Ray - its time locally)"
	},
	run: runRay,
}

func runRay(ctx context.Context, e *env) (result, error) {
	res := result{}
	root := os.Getenv("EDGEPIPE_CACHE")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "edgepipe")
	}
	weed, err1 := testseaweed.Weed()
	py, err2 := testray.Python(root)
	if err1 != nil || err2 != nil {
		res.skipped = "needs the seaweedfs and ray toolchains: edgepipe toolchain install seaweedfs ray"
		return res, nil
	}
	dir, err := e.workdir("ray")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	recipe, toolEnv, tools := filepath.Join(e.root, "recipes", "demo.yaml"), []string{}, "real"
	if why, err := e.toolchainsMissing(ctx, demoToolchains); err != nil || why != "" {
		tools, recipe, toolEnv = "stand-ins: "+why, filepath.Join(dir, "recipe.yaml"), []string{"EDGEPIPE_TOOL_PATH=" + e.standins}
		if err := writeTinyProject(dir, "raybench", "  laptop-q4:\n    device: x86-laptop\n    format: gguf-q4_0\n"); err != nil {
			return res, err
		}
	}
	srv, err := testseaweed.Start(ctx, weed, dir) // its data under dir/data
	if err != nil {
		return res, err
	}
	defer srv.Close()
	extra := append(append(srv.Writer.Env(), "AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/nonexistent"), toolEnv...)
	envs, err := testray.NodeEnvs(filepath.Join(dir, "nodes"), root, 3, []string{"toolchains", "models"}, extra)
	if err != nil {
		return res, err
	}
	started := time.Now()
	cluster, err := testray.Start(ctx, py, testray.Options{NodeEnv: envs, CPUs: 2, HeadCPUs: 0, TempDir: filepath.Join(dir, "ray")})
	if err != nil {
		return res, err
	}
	defer cluster.Close()
	e.logf("ray: cluster up in %s", time.Since(started).Round(time.Second))
	run := func(name string, args ...string) (measurement, map[string]float64, error) {
		cache, err := testray.FreshCache(filepath.Join(dir, name), root, "toolchains", "models")
		if err != nil {
			return measurement{}, nil, err
		}
		argv := append([]string{e.edgepipe, "run", "--json", "--out", filepath.Join(dir, "out-"+name)}, append(args, recipe)...)
		m, err := mustSucceed(ctx, command{argv: argv, dir: dir, env: append([]string{"EDGEPIPE_CACHE=" + cache}, extra...)})
		return m, event.StepSeconds(m.stdout), err
	}
	e.logf("ray: the recipe locally at -j 2, then on the cluster")
	local, localSteps, err := run("local", "-j", "2")
	if err != nil {
		return res, err
	}
	ray, raySteps, err := run("ray", "--engine", "ray", "--ray-address", cluster.Address, "--ray-edgepipe", e.edgepipe, "--remote-cache", srv.URL("bench"))
	if err != nil {
		return res, err
	}
	over, n := 0.0, 0
	for id, s := range raySteps {
		if l, ok := localSteps[id]; ok {
			over, n = over+s-l, n+1
		}
	}
	res.add("tools", tools)
	res.add("local_j2_s", local.wall)
	res.add("ray_3_nodes_s", ray.wall)
	res.add("steps_on_ray", float64(len(raySteps)))
	res.add("overhead_per_step_s", over/float64(max(n, 1)))
	res.ratio = ray.wall.Seconds() / local.wall.Seconds()
	return res, nil
}
