package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/steps"
)

// A run interrupted while a step's tool runs: the tool and what it
// started are stopped, the step's half-written output is not committed,
// the work finished before is cached, and what never started is reported
// canceled, not failed.
func TestCancelMidRun(t *testing.T) {
	f := newFixture(t, header+`  quick: {uses: enginetest, with: {content: q}}
  slow: {uses: enginetest, needs: [quick], with: {content: s}}
  after: {uses: enginetest, needs: [slow], with: {content: a}}
`)
	pids := filepath.Join(f.dir, "pids")
	setHook(t, "slow", func(ctx context.Context, sc *steps.Context) error {
		if err := os.WriteFile(filepath.Join(sc.Out, "half.bin"), []byte("half"), 0o644); err != nil {
			return err
		}
		// The shell and a helper it started, in the tool's process group.
		return sc.Exec(ctx, []string{"sh", "-c", `sleep 60 & echo $$ $! > "$1.tmp" && mv "$1.tmp" "$1"; wait`, "sh", pids}, nil)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if _, err := os.Stat(pids); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	e := f.engine(Options{Jobs: 2})
	done := make(chan struct{})
	var res *RunResult
	var err error
	go func() {
		defer close(done)
		res, err = e.Run(ctx)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end after it was canceled")
	}
	if !errors.Is(err, context.Canceled) || !IsInterrupted(err) {
		t.Fatalf("err = %v, want the interruption", err)
	}
	if len(res.Failed) != 0 {
		t.Errorf("an interruption reported failures: %v", res.Failed)
	}
	b, rerr := os.ReadFile(pids)
	if rerr != nil {
		t.Fatal(rerr)
	}
	for _, field := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(field)
		if !gone(pid) {
			t.Errorf("process %d of the canceled step still runs", pid)
		}
	}
	for _, id := range []string{"slow", "after"} {
		if evs := f.eventsOf(event.Canceled, id); len(evs) != 1 {
			t.Errorf("%s: canceled events %+v, want one", id, evs)
		}
		if evs := f.eventsOf(event.Failed, id); len(evs) != 0 {
			t.Errorf("%s: an interrupted step reported failed: %+v", id, evs)
		}
	}
	slowKey := e.Key("slow")
	if slowKey == "" {
		t.Fatal("slow has no key")
	}
	if _, hit, _ := f.cache.Lookup(slowKey); hit {
		t.Error("the interrupted step's output was committed")
	}
	tmp, _ := os.ReadDir(filepath.Join(f.cache.Root(), "tmp"))
	for _, d := range tmp {
		if strings.HasPrefix(d.Name(), slowKey) {
			t.Errorf("the interrupted step left %s in the cache's tmp", d.Name())
		}
	}
	if _, hit, _ := f.cache.Lookup(e.Key("quick")); !hit {
		t.Error("the step finished before the interruption is not cached")
	}

	// The next run takes the finished step from the cache and runs the
	// interrupted one from an empty folder.
	setHook(t, "slow", nil)
	res, err = f.engine(Options{Jobs: 2}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if runs.runs("quick") != 1 || len(f.eventsOf(event.Cached, "quick")) != 1 {
		t.Errorf("quick ran %d times; cached events %v", runs.runs("quick"), f.eventsOf(event.Cached, "quick"))
	}
	if runs.runs("slow") != 2 {
		t.Errorf("slow ran %d times, want 2", runs.runs("slow"))
	}
	if _, err := os.Stat(filepath.Join(res.Outputs["slow"].Dir, "half.bin")); err == nil {
		t.Error("the rerun's output holds the interrupted run's half-written file")
	}
}

// gone reports whether pid has exited (a zombie waiting to be reaped by
// whoever inherited it counts), waiting a few seconds for it.
func gone(pid int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return true
		}
		// Linux: the state follows the command's closing parenthesis.
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i:]), ") Z") {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
