package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestParentDeathKillsTool: when edgepipe itself is killed with no chance
// to clean up, the tool it was running dies too (Pdeathsig).
func TestParentDeathKillsTool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runnerPid, toolPid := filepath.Join(dir, "runner.pid"), filepath.Join(dir, "tool.pid")
	runner := exec.Command(os.Args[0], runnerPid, toolPid)
	runner.Env = append(os.Environ(), childMode+"=runner")
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	waitPid(t, runnerPid)
	tool := waitPid(t, toolPid)
	if err := runner.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	runner.Wait()
	requireGone(t, "tool of a killed runner", tool)
}

// A helper that left the tool's process group (setsid) dies with the
// tool all the same: nothing a step started outlives the step.
func TestSetsidHelperDiesWithTool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tool, helper, escaped := filepath.Join(dir, "tool.pid"), filepath.Join(dir, "helper.pid"), filepath.Join(dir, "setsid.pid")
	if err := Run(context.Background(), self("family", tool, helper, escaped, "exit")); err != nil {
		t.Fatal(err)
	}
	requireGone(t, "helper in the tool's group", waitPid(t, helper))
	requireGone(t, "setsid helper", waitPid(t, escaped))
}

// kill -9 of edgepipe leaves nothing running: not the tool (Pdeathsig),
// not its helpers in its group, not one that called setsid (the watchdog).
func TestKill9LeavesNothingRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runnerPid := filepath.Join(dir, "runner.pid")
	tool, helper, escaped := filepath.Join(dir, "tool.pid"), filepath.Join(dir, "helper.pid"), filepath.Join(dir, "setsid.pid")
	runner := exec.Command(os.Args[0], runnerPid, tool, helper, escaped)
	runner.Env = append(os.Environ(), childMode+"=runner-family")
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	waitPid(t, runnerPid)
	pids := map[string]int{"tool": waitPid(t, tool), "helper in the tool's group": waitPid(t, helper), "setsid helper": waitPid(t, escaped)}
	if err := runner.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	runner.Wait()
	for what, pid := range pids {
		requireGone(t, what+" of a killed edgepipe", pid)
	}
}

// The watchdog is started by its arguments and a parent that holds its
// pipe, never by the environment: a variable a CI job sets (in whatever
// form the old trigger took) must not turn edgepipe into a watchdog that
// does nothing and exits 0. Nor do the arguments alone, from a parent the
// prefix does not name.
func TestWatchdogIsNotTriggeredFromOutside(t *testing.T) {
	t.Parallel()
	for name, cmd := range map[string]*exec.Cmd{
		"environment": exec.Command(os.Args[0], "3", "still ran"),
		"arguments":   exec.Command(os.Args[0], watchdogArg, "1.2."),
	} {
		cmd.Env = append(os.Environ(), childMode+"=exit", "EDGEPIPE_PROC_WATCHDOG=1.2.")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		switch name {
		case "environment":
			if code != 3 || !strings.Contains(string(out), "still ran") {
				t.Errorf("%s: exit %d, %q: want the program's own exit 3 and output", name, code, out)
			}
		case "arguments":
			// Not a watchdog (stdin is no pipe), and the arguments never
			// fall through to the program: a test binary given them ran
			// its whole test suite as a stray "watchdog".
			if code != 2 || !strings.Contains(string(out), "not a command") {
				t.Errorf("%s: exit %d, %q: want exit 2 and no program", name, code, out)
			}
		}
	}
}

// A watchdog whose parent died before it looked (a SIGKILL right after
// the start) is still the watchdog: a pipe on stdin and a tag prefix are
// what make it one, not a living parent.
func TestWatchdogWithADeadParentStillWatches(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old }()
	if !isWatchdog("999999.123.") {
		t.Fatal("a tag prefix naming a pid that is not our parent, with a pipe on stdin, was not taken for the watchdog")
	}
	if isWatchdog("1.2") || isWatchdog("") {
		t.Fatal("a malformed prefix was taken for the watchdog")
	}
	os.Stdin = old
	if f, err := os.Open(os.DevNull); err == nil {
		os.Stdin = f
		defer f.Close()
		if isWatchdog("999999.123.") {
			t.Fatal("without a pipe on stdin, it took itself for the watchdog")
		}
	}
}
