package tools

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
)

// writeTool writes an executable shell script named name into dir.
func writeTool(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// alive reports whether the pid written to file is still running.
func alive(t *testing.T, file string) bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the tool did not start its helper: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		// kill(0, 0) would probe this test's own process group.
		t.Fatalf("the helper's pid file holds %q, not a pid", b)
	}
	return syscall.Kill(pid, 0) == nil
}

func waitGone(t *testing.T, file string) {
	t.Helper()
	for i := 0; i < 200 && alive(t, file); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(t, file) {
		t.Errorf("the helper the --version probe started is still running")
	}
}

// A --version that leaves a helper holding its stdout answers at once,
// and the helper is killed with the tool's process group.
func TestVersionProbeKillsHelpers(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "helper.pid")
	writeTool(t, dir, "leaky", `sleep 300 & echo $! > `+pidFile+`.tmp && mv `+pidFile+`.tmp `+pidFile+`
echo "leaky 1.2.3"
`)
	tr := &Resolver{Path: []string{dir}}
	done := make(chan error, 1)
	var tool *Tool
	go func() {
		var err error
		tool, err = tr.Resolve(context.Background(), "leaky")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Resolve waited for the helper that holds the tool's stdout")
	}
	if tool.Version != "leaky 1.2.3" {
		t.Errorf("version %q, want %q", tool.Version, "leaky 1.2.3")
	}
	waitGone(t, pidFile)
}

// Cancelling the run stops a --version probe that hangs, and its helpers.
func TestVersionProbeHonoursContext(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "helper.pid")
	writeTool(t, dir, "stuck", `sleep 300 & echo $! > `+pidFile+`.tmp && mv `+pidFile+`.tmp `+pidFile+`
wait
`)
	tr := &Resolver{Path: []string{dir}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := tr.Resolve(ctx, "stuck")
		done <- err
	}()
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Resolve after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Resolve ignored the canceled context")
	}
	waitGone(t, pidFile)
}
