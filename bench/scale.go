package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/benchstat"
)

var scaleBench = benchmark{
	name: "scale",
	about: func(e *env) string {
		return "how plan, a no-op rerun and publishing grow with the model's bytes (sharded safetensors of " +
			"1, 4 and 16 GiB, written sparse: holes read back as zeros through the same open/mmap/hash path, " +
			"and under model/original/ so the digest covers them while the stand-in converter does not load them) " +
			"and with the number of targets (10, 100, 1000 on a tiny model). first_s includes hashing the model once; " +
			"ratio = noop_s at 16 GiB / noop_s at 1 GiB (O(files): about 1)"
	},
	run: runScale,
}

// scaleShard is the size of one synthetic shard, as Hugging Face shards
// big checkpoints (5 GB there; smaller here so 1 GiB is one shard).
const scaleShard = 1 << 30

type scaleRow struct {
	label                      string
	first, plan, noop, publish time.Duration
}

func runScale(ctx context.Context, e *env) (result, error) {
	res := result{}
	var rows []scaleRow
	for _, gib := range []int64{1, 4, 16} {
		r, err := scaleModel(ctx, e, gib<<30)
		if err != nil {
			return res, err
		}
		rows = append(rows, r)
	}
	for _, n := range []int{10, 100, 1000} {
		r, err := scaleTargets(ctx, e, n)
		if err != nil {
			return res, err
		}
		rows = append(rows, r)
	}
	fmt.Fprintf(e.log, "  %-12s %9s %9s %9s %9s\n", "case", "first_s", "plan_s", "noop_s", "publish_s")
	for _, r := range rows {
		fmt.Fprintf(e.log, "  %-12s %9.3f %9.3f %9.3f %9.3f\n", r.label, r.first.Seconds(), r.plan.Seconds(), r.noop.Seconds(), r.publish.Seconds())
	}
	for _, r := range rows {
		res.add(r.label+"_first_s", r.first)
		res.add(r.label+"_plan_s", r.plan)
		res.add(r.label+"_noop_s", r.noop)
		res.add(r.label+"_publish_s", r.publish)
	}
	// How each grows from the smallest case to the largest (16x the bytes,
	// 100x the targets).
	res.add("bytes_16x_first", rows[2].first.Seconds()/rows[0].first.Seconds())
	res.add("bytes_16x_noop", rows[2].noop.Seconds()/rows[0].noop.Seconds())
	res.add("bytes_16x_plan", rows[2].plan.Seconds()/rows[0].plan.Seconds())
	res.add("targets_100x_plan", rows[5].plan.Seconds()/rows[3].plan.Seconds())
	res.add("targets_100x_noop", rows[5].noop.Seconds()/rows[3].noop.Seconds())
	res.add("targets_100x_publish", rows[5].publish.Seconds()/rows[3].publish.Seconds())
	res.ratio = rows[2].noop.Seconds() / rows[0].noop.Seconds()
	return res, nil
}

// scaleModel times one recipe over a model of size bytes.
func scaleModel(ctx context.Context, e *env, size int64) (scaleRow, error) {
	label := fmtBytes(size)
	dir, err := e.workdir("scale-" + label)
	if err != nil {
		return scaleRow{}, err
	}
	defer os.RemoveAll(dir)
	if err := writeTinyProject(dir, "scale", ""); err != nil {
		return scaleRow{}, err
	}
	orig := filepath.Join(dir, "model", "original")
	if err := os.MkdirAll(orig, 0o755); err != nil {
		return scaleRow{}, err
	}
	n := int((size + scaleShard - 1) / scaleShard)
	for i := range n {
		p := filepath.Join(orig, fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n))
		if err := writeSparse(p, min(scaleShard, size-int64(i)*scaleShard), uint64(i)); err != nil {
			return scaleRow{}, err
		}
	}
	return scaleTimes(ctx, e, dir, label)
}

// writeSparse writes a file of size bytes that is a hole but for a few
// distinct bytes at the start, so no two shards hash alike.
func writeSparse(path string, size int64, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "shard %d\n", seed); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// scaleTargets times a tiny model's recipe with n targets.
func scaleTargets(ctx context.Context, e *env, n int) (scaleRow, error) {
	label := fmt.Sprintf("%d_targets", n)
	dir, err := e.workdir("scale-" + label)
	if err != nil {
		return scaleRow{}, err
	}
	defer os.RemoveAll(dir)
	var b strings.Builder
	for i := 1; i < n; i++ { // the tiny project has one target already
		fmt.Fprintf(&b, "  t%04d:\n    device: x86-laptop\n    format: gguf-q8_0\n", i)
	}
	if err := writeTinyProject(dir, "scale", ""); err != nil {
		return scaleRow{}, err
	}
	recipe := filepath.Join(dir, "recipe.yaml")
	body, err := os.ReadFile(recipe)
	if err != nil {
		return scaleRow{}, err
	}
	if err := os.WriteFile(recipe, append(body, b.String()...), 0o644); err != nil {
		return scaleRow{}, err
	}
	return scaleTimes(ctx, e, dir, label)
}

// scaleTimes runs the recipe in dir once (first), then times plan, a
// no-op rerun and a rerun that only publishes (artifacts removed).
func scaleTimes(ctx context.Context, e *env, dir, label string) (scaleRow, error) {
	r := scaleRow{label: label}
	cache := filepath.Join(dir, "cache")
	out := filepath.Join(dir, "artifacts")
	run := command{argv: []string{e.edgepipe, "run", "-j", "2", "--out", out, "recipe.yaml"}, dir: dir, env: e.standinEnv(cache)}
	plan := command{argv: []string{e.edgepipe, "plan", "recipe.yaml"}, dir: dir, env: e.standinEnv(cache)}
	e.logf("scale %s: first run", label)
	m, err := mustSucceed(ctx, run)
	if err != nil {
		return r, err
	}
	r.first = m.wall
	settle()
	var plans, noops, pubs []time.Duration
	for range e.reps {
		if m, err = mustSucceed(ctx, plan); err != nil {
			return r, err
		}
		plans = append(plans, m.wall)
		if m, err = mustSucceed(ctx, run); err != nil {
			return r, err
		}
		noops = append(noops, m.wall)
		if err := os.RemoveAll(out); err != nil {
			return r, err
		}
		if m, err = mustSucceed(ctx, run); err != nil {
			return r, err
		}
		pubs = append(pubs, m.wall)
	}
	r.plan, r.noop, r.publish = benchstat.Median(plans), benchstat.Median(noops), benchstat.Median(pubs)
	return r, nil
}
