//go:build linux

package proc

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the child in a process group of its own, so that a
// terminal's Ctrl-C reaches only edgepipe (which decides what to stop) and
// the whole group can be signalled at once. Pdeathsig kills the child if
// edgepipe dies without cleaning up (kill -9). Linux ties Pdeathsig to the
// thread that forked the child; the Go runtime only retires threads whose
// goroutine exits while locked to them, which this package never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// watch reports when the child has exited without reaping it. Until it is
// reaped its pid, and therefore the group id, cannot be reused, so
// signalling the group after the exit cannot hit an unrelated process.
// reap collects the exit status and finishes copying output.
func watch(cmd *exec.Cmd) (exited <-chan struct{}, reap func() error) {
	ch := make(chan struct{})
	pid := cmd.Process.Pid
	go func() {
		defer close(ch)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return
			}
		}
	}()
	return ch, cmd.Wait
}
