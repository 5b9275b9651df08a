package proc

import (
	"os"
	"os/exec"
	"path/filepath"
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
