//go:build linux

package rayexec

import (
	"os/exec"
	"syscall"
)

// sysProcAttr: the bridge in a process group of its own (Ctrl-C reaches
// edgepipe only, which cancels the Ray tasks itself), killed if edgepipe
// dies without cleaning up.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
