package rayexec

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/steps"
)

// TestMain turns the test binary into a fake bridge when asked: it speaks
// ray_bridge.py's protocol without Ray (the real one runs in the real
// tier, cmd/edgepipe's TestRealRay).
func TestMain(m *testing.M) {
	if os.Getenv("EDGEPIPE_FAKE_RAY_BRIDGE") == "1" {
		os.Exit(fakeBridge())
	}
	os.Exit(m.Run())
}

func fakeBridge() int {
	if strings.Contains(strings.Join(os.Args, " "), "unreachable") {
		fmt.Println(`{"event": "fatal", "error": "ConnectionError: no cluster"}`)
		return 1
	}
	fmt.Println(`{"event": "ready", "nodes": 3, "cpus": 6, "resources": {"CPU": 6}}`)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var msg struct {
			Op, ID string
			Argv   []string
		}
		if json.Unmarshal(in.Bytes(), &msg) != nil {
			continue
		}
		switch {
		case msg.Op == "submit" && msg.ID == "hang":
		case msg.Op == "submit" && msg.ID == "fail":
			out, _ := json.Marshal(`{"event":"step-failed","step":"fail","message":"llama-quantize exited 1"}` + "\n")
			fmt.Printf(`{"event": "done", "id": "fail", "exit": 1, "node": "127.0.0.1", "output": %s}`+"\n", out)
		case msg.Op == "submit":
			out, _ := json.Marshal(fmt.Sprintf(`{"event":"step-started","step":%q,"cache_key":"workerkey"}`+"\nnoise\n", msg.ID))
			fmt.Printf(`{"event": "done", "id": %q, "exit": 0, "node": "127.0.0.2", "output": %s}`+"\n", msg.ID, out)
		case msg.Op == "cancel":
			fmt.Printf(`{"event": "error", "id": %q, "error": "TaskCancelledError"}`+"\n", msg.ID)
		}
	}
	return 0
}

func startFake(t *testing.T, address string) (*Bridge, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Start(context.Background(), []string{exe}, address, "/nonexistent/bundle", append(os.Environ(), "EDGEPIPE_FAKE_RAY_BRIDGE=1"))
}

func TestBridgeRunsCancelsAndCloses(t *testing.T) {
	b, err := startFake(t, "127.0.0.1:6379")
	if err != nil {
		t.Fatal(err)
	}
	if b.Ready.Nodes != 3 || b.Ready.CPUs != 6 {
		t.Errorf("ready: %+v", b.Ready)
	}
	x := &Executor{Bridge: b, Edgepipe: "edgepipe", RemoteCache: "s3::http://127.0.0.1:1/b"}
	key, where, err := x.Dispatch(context.Background(), dispatch("gguf-convert:f16", steps.Resources{Cores: 2}))
	if err != nil || key != "workerkey" || where != "Ray node 127.0.0.2" {
		t.Errorf("dispatch: key %q, where %q, err %v", key, where, err)
	}
	_, _, err = x.Dispatch(context.Background(), dispatch("fail", steps.Resources{}))
	if err == nil || !strings.Contains(err.Error(), "llama-quantize exited 1") || !strings.Contains(err.Error(), "exited 1 on Ray node") {
		t.Errorf("a failed step: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := b.Run(ctx, Task{ID: "hang"}); err != context.DeadlineExceeded {
		t.Errorf("canceled run: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

func TestBridgeReportsAnUnreachableCluster(t *testing.T) {
	_, err := startFake(t, "unreachable:1")
	if err == nil || !strings.Contains(err.Error(), "no cluster") {
		t.Fatalf("err = %v", err)
	}
}

func dispatch(id string, r steps.Resources) engine.Dispatch {
	return engine.Dispatch{Step: &plan.Step{ID: id}, Resources: r, MemoryMB: 1536}
}

func TestTaskResources(t *testing.T) {
	x := &Executor{Edgepipe: "/usr/bin/edgepipe", RemoteCache: "s3::u", MaxRetries: 3}
	task := x.Task(dispatch("b", steps.Resources{Cores: 2, Host: steps.HostNeeds{NvidiaGPU: true, Device: "jetson-thor", PrefersMacOS: true}}))
	if task.NumCPUs != 2 || task.Memory != 1536<<20 || task.NumGPUs != 1 || task.MaxRetries != 3 {
		t.Errorf("task %+v", task)
	}
	if task.Resources["device-jetson-thor"] != 1 || task.Prefer["macos"] != 1 {
		t.Errorf("host resources %+v %+v", task.Resources, task.Prefer)
	}
	argv := strings.Join(task.Argv, " ")
	if argv != "/usr/bin/edgepipe step run {bundle} b --remote-cache s3::u --remote-cache-mode readwrite -j 2 --json" {
		t.Errorf("argv %s", argv)
	}
	forced := dispatch("f", steps.Resources{})
	forced.Force = true
	if argv := x.Task(forced).Argv; argv[len(argv)-1] != "--force" {
		t.Errorf("--force is not passed on: %v", argv)
	}
	if cpu := x.Task(dispatch("c", steps.Resources{})); cpu.NumGPUs != 0 || cpu.Resources != nil || cpu.NumCPUs != 1 {
		t.Errorf("a CPU step: %+v", cpu)
	}
}
