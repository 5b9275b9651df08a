package rayexec

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/event"
)

// Executor dispatches steps to Ray through a Bridge (engine.Dispatcher).
type Executor struct {
	Bridge *Bridge
	// Edgepipe is the command that runs edgepipe on the workers (on their
	// PATH, or a path every node has).
	Edgepipe string
	// RemoteCache is the URL workers read needs from and write outputs to.
	RemoteCache string
	// MaxRetries: Ray reruns a task whose worker or node died this many
	// times, on another node when one is left. A step that failed is not
	// rerun.
	MaxRetries int
}

// Resource names for host needs beyond cores, memory and GPUs: a node
// advertises them with `ray start --resources '{"macos": 1}'`.
const (
	ResourceMacOS        = "macos"
	ResourceDevicePrefix = "device-"
)

// Task turns a dispatched step into a Ray task.
func (x *Executor) Task(d engine.Dispatch) Task {
	cores := max(d.Resources.Cores, 1)
	t := Task{ID: d.Step.ID, NumCPUs: float64(cores), Memory: max(d.MemoryMB, 0) << 20, MaxRetries: x.MaxRetries,
		Argv: []string{x.Edgepipe, "step", "run", "{bundle}", d.Step.ID,
			"--remote-cache", x.RemoteCache, "--remote-cache-mode", "readwrite", "-j", strconv.Itoa(cores), "--json"}}
	if d.Force {
		t.Argv = append(t.Argv, "--force")
	}
	h := d.Resources.Host
	if h.NvidiaGPU {
		t.NumGPUs = 1
	}
	if h.Device != "" {
		t.Resources = map[string]float64{ResourceDevicePrefix + h.Device: 1}
	}
	if h.PrefersMacOS {
		t.Prefer = map[string]float64{ResourceMacOS: 1}
	}
	return t
}

// Dispatch runs the step on Ray and returns the key its worker stored the
// output under.
func (x *Executor) Dispatch(ctx context.Context, d engine.Dispatch) (string, string, error) {
	r, err := x.Bridge.Run(ctx, x.Task(d))
	if err != nil {
		return "", "", err
	}
	where := "Ray node " + r.Node
	if r.Event == "error" {
		return "", "Ray", fmt.Errorf("ray could not run it: %s", r.Error)
	}
	if r.Exit != 0 {
		return "", where, fmt.Errorf("`edgepipe step run` exited %d on %s:\n%s", r.Exit, where, failureText(r.Output))
	}
	return workerKey(r.Output, d.Step.ID), where, nil
}

// workerKey finds the key the worker's `step run --json` used for the
// step ("" when its events do not say: the orchestrator's own key).
func workerKey(output, id string) string {
	key := ""
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev event.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Step != id || ev.Key == "" {
			continue
		}
		key = ev.Key
	}
	return key
}

// failureText is the worker's failure events' messages, else its output.
func failureText(output string) string {
	var msgs []string
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev event.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == event.Failed && ev.Message != "" {
			msgs = append(msgs, ev.Message)
		}
	}
	if len(msgs) > 0 {
		return strings.Join(msgs, "\n")
	}
	return lastLines(output, 20)
}
