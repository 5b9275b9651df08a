// Package rayexec runs a plan's steps on a Ray cluster. edgepipe keeps the
// DAG (internal/engine schedules, gates and publishes); Ray only places
// and runs each ready step, as a task running `edgepipe step run BUNDLE
// STEP` on a node with the resources the step needs, and the step's output
// comes back through the remote cache.
//
// Ray is driven through python/ray_bridge.py, run in the pinned
// `ray` toolchain, over JSON lines on its stdin and stdout.
package rayexec

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Ready is what the bridge reports once connected.
type Ready struct {
	Nodes     int                `json:"nodes"`
	CPUs      float64            `json:"cpus"`
	Resources map[string]float64 `json:"resources"`
}

// Reply is a step's end as the bridge reports it.
type Reply struct {
	Event  string `json:"event"` // done, error
	ID     string `json:"id"`
	Exit   int    `json:"exit"`
	Node   string `json:"node"`
	Output string `json:"output"`
	Error  string `json:"error"`
}

// Task is one step to run: argv on a worker ("{bundle}" is the bundle's
// path there) and the resources to place it by.
type Task struct {
	ID         string             `json:"id"`
	Argv       []string           `json:"argv"`
	NumCPUs    float64            `json:"num_cpus"`
	Memory     int64              `json:"memory"`
	NumGPUs    float64            `json:"num_gpus,omitempty"`
	Resources  map[string]float64 `json:"resources,omitempty"`
	Prefer     map[string]float64 `json:"prefer,omitempty"`
	MaxRetries int                `json:"max_retries"`
}

// Bridge is a running ray_bridge.py.
type Bridge struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	writeMu sync.Mutex
	mu      sync.Mutex
	waiting map[string]chan Reply
	dead    chan struct{} // closed when the bridge's stdout ends
	deadErr error
	stderr  *tailBuffer
	Ready   Ready
}

// ConnectTimeout bounds connecting to the cluster and shipping the bundle.
var ConnectTimeout = 2 * time.Minute

// Start runs the bridge (argv: the toolchain's python and the script) and
// waits until it is connected to the cluster at address.
func Start(ctx context.Context, argv []string, address, bundlePath string, env []string) (*Bridge, error) {
	cmd := exec.Command(argv[0], append(argv[1:], "--address", address, "--bundle", bundlePath)...)
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	b := &Bridge{cmd: cmd, waiting: map[string]chan Reply{}, dead: make(chan struct{}), stderr: &tailBuffer{max: 16 << 10}}
	cmd.Stderr = b.stderr
	var err error
	if b.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the Ray bridge: %w", err)
	}
	ready := make(chan error, 1)
	go b.read(stdout, ready)
	timer := time.NewTimer(ConnectTimeout)
	defer timer.Stop()
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("no answer from the Ray cluster at %s within %s", address, ConnectTimeout)
	}
	if err != nil {
		b.Close()
		if tail := b.stderr.String(); tail != "" && ctx.Err() == nil {
			err = fmt.Errorf("%w\n%s", err, tail)
		}
		return nil, err
	}
	return b, nil
}

// read dispatches the bridge's events until its stdout ends.
func (b *Bridge) read(stdout io.Reader, ready chan<- error) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	readySent := false
	for sc.Scan() {
		var ev struct {
			Reply
			Ready
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // not ours (a library printing to stdout)
		}
		switch ev.Event {
		case "ready":
			b.Ready = ev.Ready
			if !readySent {
				readySent = true
				ready <- nil
			}
		case "fatal":
			if !readySent {
				readySent = true
				ready <- fmt.Errorf("connect to Ray: %s", ev.Error)
			}
		case "done", "error":
			b.mu.Lock()
			ch := b.waiting[ev.ID]
			delete(b.waiting, ev.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- ev.Reply
			}
		}
	}
	b.mu.Lock()
	b.deadErr = errors.New("the Ray bridge exited")
	if tail := strings.TrimSpace(b.stderr.String()); tail != "" {
		b.deadErr = fmt.Errorf("the Ray bridge exited: %s", lastLines(tail, 10))
	}
	b.mu.Unlock()
	close(b.dead)
	if !readySent {
		ready <- b.deadErr
	}
}

func (b *Bridge) send(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	_, err = b.stdin.Write(append(line, '\n'))
	return err
}

// CancelWait bounds how long a canceled task may take to stop.
var CancelWait = 15 * time.Second

// Run submits a task and waits for its end. Canceling ctx cancels the
// Ray task (its edgepipe gets SIGTERM, then its tool's group).
func (b *Bridge) Run(ctx context.Context, t Task) (Reply, error) {
	ch := make(chan Reply, 1)
	b.mu.Lock()
	if _, dup := b.waiting[t.ID]; dup {
		b.mu.Unlock()
		return Reply{}, fmt.Errorf("step %s is already running on Ray", t.ID)
	}
	b.waiting[t.ID] = ch
	b.mu.Unlock()
	sub := struct {
		Op string `json:"op"`
		Task
	}{"submit", t}
	if err := b.send(sub); err != nil {
		return Reply{}, fmt.Errorf("submit to the Ray bridge: %w", err)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-b.dead:
		return Reply{}, b.deadErr
	case <-ctx.Done():
	}
	_ = b.send(map[string]string{"op": "cancel", "id": t.ID})
	timer := time.NewTimer(CancelWait)
	defer timer.Stop()
	select {
	case <-ch:
	case <-b.dead:
	case <-timer.C:
	}
	return Reply{}, ctx.Err()
}

// Close ends the bridge: end of input cancels what still runs and
// disconnects; past a grace period its process group is killed.
func (b *Bridge) Close() error {
	b.writeMu.Lock()
	b.stdin.Close()
	b.writeMu.Unlock()
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(CancelWait + 10*time.Second):
		killGroup(b.cmd)
		return <-done
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
