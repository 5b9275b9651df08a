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

	"github.com/edgepipe/edgepipe/bench/benchdata"
	"github.com/edgepipe/edgepipe/internal/benchstat"
	"github.com/edgepipe/edgepipe/internal/event"
)

var noopRerunBench = benchmark{
	name: "noop-rerun",
	about: func(e *env) string {
		return fmt.Sprintf("rerun of a fully cached recipe over a %s model folder (the big shards sit in model/original/: the source digest covers them, "+
			"the stand-in converter skips them); peers: go-task with the same sources, method checksum and timestamp; goal < 0.1 s and < 1 MiB read", fmtBytes(e.noopBytes))
	},
	run: runNoopRerun,
}

const noopShards = 4

func runNoopRerun(ctx context.Context, e *env) (result, error) {
	res := result{}
	dir, err := e.workdir("noop")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	cache := filepath.Join(dir, "cache")

	if err := writeTinyProject(dir, "noop", ""); err != nil {
		return res, err
	}
	e.logf("noop-rerun: writing %s of model inputs under %s", fmtBytes(e.noopBytes), dir)
	orig := filepath.Join(dir, "model", "original")
	if err := os.MkdirAll(orig, 0o755); err != nil {
		return res, err
	}
	var shards []string
	for i := range noopShards {
		p := filepath.Join(orig, fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, noopShards))
		if err := benchdata.WriteRandom(ctx, p, e.noopBytes/noopShards, uint64(i+1)); err != nil {
			return res, err
		}
		shards = append(shards, p)
	}
	inputs, err := dirSize(filepath.Join(dir, "model"))
	if err != nil {
		return res, err
	}
	taskfile := filepath.Join(dir, "Taskfile.yml")
	if err := os.WriteFile(taskfile, []byte(noopTaskfile), 0o644); err != nil {
		return res, err
	}
	task, err := e.goTask(ctx)
	if err != nil {
		return res, err
	}
	settle()

	edgepipe := func(extra ...string) command {
		argv := append([]string{e.edgepipe, "run", "--json"}, extra...)
		return command{argv: append(argv, "recipe.yaml"), dir: dir, env: e.standinEnv(cache)}
	}
	peer := func(name string) command {
		return command{argv: []string{task, "--taskfile", taskfile, name}, dir: dir}
	}

	// Setup: the cold run hashes every input and builds the target; each
	// peer runs its task once to record its checksums or stamp.
	e.logf("noop-rerun: cold run (setup, hashes %s)", fmtBytes(inputs))
	if _, err := mustSucceed(ctx, edgepipe()); err != nil {
		return res, err
	}
	for _, name := range []string{"checksum", "timestamp"} {
		if _, err := mustSucceed(ctx, peer(name)); err != nil {
			return res, err
		}
	}
	settle()
	if _, err := cachedRun(ctx, edgepipe()); err != nil { // warm-up
		return res, err
	}

	e.logf("noop-rerun: timing %d reruns of each side", e.reps)
	var epTimes, epCPU, tsTimes, csTimes []time.Duration
	var epRead, epDisk, csRead int64
	for i := range max(e.reps, e.slowReps) {
		if i < e.reps {
			m, err := cachedRun(ctx, edgepipe())
			if err != nil {
				return res, err
			}
			epTimes, epCPU = append(epTimes, m.wall), append(epCPU, m.cpu)
			epRead, epDisk = max(epRead, m.rchar), max(epDisk, m.readBytes)

			m, err = upToDate(ctx, peer("timestamp"))
			if err != nil {
				return res, err
			}
			tsTimes = append(tsTimes, m.wall)
		}
		if i < e.slowReps {
			m, err := upToDate(ctx, peer("checksum"))
			if err != nil {
				return res, err
			}
			csTimes = append(csTimes, m.wall)
			csRead = max(csRead, m.rchar)
		}
	}
	if csRead < inputs {
		return res, fmt.Errorf("the go-task checksum peer read %d bytes, fewer than the %d bytes of inputs: its sources glob misses files, so it is no fair peer", csRead, inputs)
	}

	e.logf("noop-rerun: one --verify run (rehashes everything)")
	verify, err := cachedRun(ctx, edgepipe("--verify"))
	if err != nil {
		return res, fmt.Errorf("--verify: %w", err)
	}

	// Touching one shard changes its mtime and ctime: edgepipe must read it
	// again, find the same digest, and still hit the cache; after that the
	// memo holds the new identity and a rerun reads nothing again.
	now := time.Now()
	if err := os.Chtimes(shards[1], now, now); err != nil {
		return res, err
	}
	settle()
	touched, err := cachedRun(ctx, edgepipe())
	if err != nil {
		return res, fmt.Errorf("after touching %s: %w", filepath.Base(shards[1]), err)
	}
	after, err := cachedRun(ctx, edgepipe())
	if err != nil {
		return res, err
	}

	ep, ts, cs := benchstat.Median(epTimes), benchstat.Median(tsTimes), benchstat.Median(csTimes)
	shardSize := e.noopBytes / noopShards
	res.add("inputs", fmtBytes(inputs))
	res.add("edgepipe_s", ep)
	res.add("edgepipe_cpu_s", benchstat.Median(epCPU))
	res.add("task_timestamp_s", ts)
	res.add("task_checksum_s", cs)
	res.add("edgepipe_read_bytes", epRead)
	res.add("edgepipe_disk_read_bytes", epDisk)
	res.add("task_checksum_read_bytes", csRead)
	res.add("verify_s", verify.wall)
	res.add("verify_read_bytes", verify.rchar)
	res.add("verify_rehashed_all", verify.rchar >= inputs)
	res.add("touch_read_bytes", touched.rchar)
	res.add("touch_rehashed", touched.rchar >= shardSize)
	res.add("touch_cache_hit", true) // cachedRun fails otherwise
	res.add("after_touch_read_bytes", after.rchar)
	res.add("ratio_vs_checksum", ep.Seconds()/cs.Seconds())
	res.add("goal", "edgepipe_s<0.1,read<1MiB")
	res.add("met", ep < 100*time.Millisecond && epRead < 1<<20)
	res.ratio = ep.Seconds() / ts.Seconds()
	return res, nil
}

// Both peers declare the model folder as sources and a stamp file as their
// output; the command only runs when they think the inputs changed.
const noopTaskfile = `version: '3'
tasks:
  checksum:
    method: checksum
    sources: ['model/**/*']
    generates: [checksum.stamp]
    cmds: [touch checksum.stamp]
  timestamp:
    method: timestamp
    sources: ['model/**/*']
    generates: [timestamp.stamp]
    cmds: [touch timestamp.stamp]
`

// cachedRun runs an `edgepipe run --json` that must be a full cache hit:
// it fails if any step started, so a timing never includes real work.
func cachedRun(ctx context.Context, c command) (measurement, error) {
	m, err := mustSucceed(ctx, c)
	if err != nil {
		return m, err
	}
	// Files edgepipe hashed through mappings were read without read(2):
	// its overhead event says how many bytes, and they count as read.
	if mapped, err := mappedBytes(m.stdout); err == nil {
		m.rchar += mapped
	} else {
		return m, err
	}
	counts, err := countEvents(m.stdout)
	if err != nil {
		return m, err
	}
	if counts[event.Started] > 0 || counts[event.Cached] == 0 {
		return m, fmt.Errorf("expected every step cached, got %d started and %d cached", counts[event.Started], counts[event.Cached])
	}
	return m, nil
}

// mappedBytes is the mapped_bytes of a --json run's overhead event.
func mappedBytes(out []byte) (int64, error) {
	evs, err := events(out)
	if err != nil {
		return 0, err
	}
	for _, ev := range evs {
		if ev.Type == event.Overhead {
			return ev.MappedBytes, nil
		}
	}
	return 0, fmt.Errorf("edgepipe run --json printed no %s event", event.Overhead)
}

// countEvents counts the event types of a --json run's output.
func countEvents(out []byte) (map[string]int, error) {
	evs, err := events(out)
	counts := map[string]int{}
	for _, ev := range evs {
		counts[ev.Type]++
	}
	return counts, err
}

// events parses edgepipe's --json output.
func events(out []byte) ([]event.Event, error) {
	var evs []event.Event
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev event.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return evs, fmt.Errorf("edgepipe --json printed a line that is not an event: %q", line)
		}
		evs = append(evs, ev)
	}
	return evs, sc.Err()
}

// upToDate runs a go-task peer that must find its task up to date (so it
// only checked its sources and ran nothing).
func upToDate(ctx context.Context, c command) (measurement, error) {
	m, err := mustSucceed(ctx, c)
	if err != nil {
		return m, err
	}
	if !strings.Contains(string(m.stderr), "is up to date") {
		return m, fmt.Errorf("go-task did not find %s up to date:\n%s", c.argv[len(c.argv)-1], m.errorText())
	}
	return m, nil
}

func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		total += fi.Size()
		return nil
	})
	return total, err
}
