package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// interruptProject is a one-target recipe whose user step runs script
// after the target is published; script writes child.pid (the shell) and
// grandchild.pid (a sleep it started) once both are running.
func interruptProject(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"model/config.json":       `{"hidden_size": 512}`,
		"model/model.safetensors": "weights",
		"eval.txt":                "a b c d e f g h i j k l m n o p q r s t u v w x y z\n",
		"recipe.yaml": `edgepipe: 1
name: sig
model: {source: ./model}
data: {eval: eval.txt}
quality: {perplexity: {context: 8}}
targets:
  q8: {device: x86-laptop, format: gguf-q8_0}
steps:
  hang:
    uses: run
    needs: [q8]
    with:
      argv: [sh, -c, '` + script + `']
`,
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startAndWaitForPids starts `edgepipe run` and waits until the user step
// has written both pid files.
func startAndWaitForPids(t *testing.T, bin, dir string) (*exec.Cmd, *bytes.Buffer, int, int) {
	t.Helper()
	cmd := edgepipe(bin, dir, "run", "recipe.yaml")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		child, grandchild := readPid(dir, "child.pid"), readPid(dir, "grandchild.pid")
		if child > 0 && grandchild > 0 {
			return cmd, &stderr, child, grandchild
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the user step never started; stderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readPid(dir, name string) int {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// gone says whether pid has exited (a zombie waiting for a reaper counts
// as gone: it runs nothing).
func gone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && (s[i+2] == 'Z' || s[i+2] == 'X')
}

func waitGone(pids ...int) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		all := true
		for _, p := range pids {
			all = all && gone(p)
		}
		if all {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("edgepipe did not exit with a code: %v", err)
	}
	return ee.ExitCode()
}

// TestInterruptStopsCleanly: the first Ctrl-C stops the running tool and
// its helpers, exits 130, and what finished before stays published and
// cached.
func TestInterruptStopsCleanly(t *testing.T) {
	bin := binDir(t)
	dir := interruptProject(t, `echo $$ > child.pid; sleep 300 & echo $! > grandchild.pid; wait`)
	cmd, stderr, child, grandchild := startAndWaitForPids(t, bin, dir)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := exitStatus(t, cmd.Wait()); code != 130 {
		t.Fatalf("exit %d, want 130; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr.String(), "interrupting") {
		t.Errorf("stderr does not say it is interrupting:\n%s", stderr)
	}
	if !waitGone(child, grandchild) {
		t.Errorf("the step's processes outlived the run (pids %d, %d)", child, grandchild)
	}
	out, err := edgepipe(bin, dir, "verify", "artifacts/sig/q8").CombinedOutput()
	if err != nil {
		t.Fatalf("the target published before the interrupt does not verify: %v\n%s", err, out)
	}
	// A rerun finds the conversion cached and runs only the user step.
	os.Remove(filepath.Join(dir, "child.pid"))
	os.Remove(filepath.Join(dir, "grandchild.pid"))
	cmd, stderr, child, grandchild = startAndWaitForPids(t, bin, dir)
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
	waitGone(child, grandchild)
	if !strings.Contains(stderr.String(), "cached   gguf-quantize:q8_0") || strings.Count(stderr.String(), "canceled hang") != 1 {
		t.Errorf("the rerun did not reuse the finished steps, or reported the cancel twice:\n%s", stderr)
	}
}

// TestSecondInterruptForces: a tool that ignores SIGTERM holds up the
// clean stop; a second Ctrl-C exits at once and kills its whole process
// group, helpers included.
func TestSecondInterruptForces(t *testing.T) {
	bin := binDir(t)
	// SIG_IGN for TERM is inherited by the sleep, so neither goes on TERM.
	dir := interruptProject(t, `trap "" TERM; echo $$ > child.pid; sleep 300 & echo $! > grandchild.pid; wait`)
	cmd, stderr, child, grandchild := startAndWaitForPids(t, bin, dir)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	// Before the grace period (5 s) runs out the tool is still there.
	time.Sleep(500 * time.Millisecond)
	if gone(child) {
		t.Fatalf("the tool ignoring SIGTERM is already gone; the test proves nothing")
	}
	start := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	code := exitStatus(t, cmd.Wait())
	if code != 130 {
		t.Fatalf("exit %d, want 130; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr.String(), "forced exit") {
		t.Errorf("stderr does not say the exit was forced:\n%s", stderr)
	}
	if !waitGone(child, grandchild) {
		t.Errorf("after a forced exit the step's processes are still running (pids %d, %d; gone: %v, %v)",
			child, grandchild, gone(child), gone(grandchild))
	}
	t.Logf("forced exit %s after the second Ctrl-C", time.Since(start).Round(time.Millisecond))
}
