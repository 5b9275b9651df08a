//go:build unix && !linux

package proc

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts the child in a process group of its own, so that a
// terminal's Ctrl-C reaches only edgepipe and the whole group can be
// signalled at once. There is no Pdeathsig outside Linux.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// watch reaps the child as soon as it exits. Unlike on Linux, the group is
// signalled after the reap, so in theory a recycled pid could be hit; that
// needs the group to be empty and its id reused within microseconds.
func watch(cmd *exec.Cmd) (exited <-chan struct{}, reap func() error) {
	ch := make(chan struct{})
	var err error
	go func() {
		err = cmd.Wait()
		close(ch)
	}()
	return ch, func() error {
		<-ch
		return err
	}
}
