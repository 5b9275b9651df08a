package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/edgepipe/edgepipe/internal/proctree"
	"golang.org/x/sys/unix"
)

// command is one child process a benchmark times.
type command struct {
	argv []string
	dir  string
	env  []string // added to the bench's own environment
	// sampleTreeRSS polls the summed RSS of the child and all its
	// descendants, for benchmarks that report peak memory of a whole run.
	sampleTreeRSS bool
}

// measurement is what one run of a command cost.
type measurement struct {
	wall     time.Duration
	cpu      time.Duration // user+sys of the child and every descendant it reaped
	exitCode int
	// rchar and readBytes come from /proc/<pid>/io of the exited child.
	// The kernel folds a reaped child's counters into its parent's, so they
	// cover every process of the run, not only the top one. rchar counts
	// bytes returned by read-like syscalls whether or not they came from the
	// page cache; readBytes counts bytes fetched from storage.
	rchar     int64
	readBytes int64
	// maxRSS is the largest resident set of any single process of the run.
	maxRSS int64
	// peakTreeRSS is the largest sampled sum of resident sets of the child
	// and its descendants (only with sampleTreeRSS; sampled, so a lower
	// bound).
	peakTreeRSS int64
	stdout      []byte
	stderr      []byte
}

// errorText is the end of the child's output, for error messages.
func (m measurement) errorText() string {
	s := strings.TrimSpace(string(m.stderr))
	if s == "" {
		s = strings.TrimSpace(string(m.stdout))
	}
	if len(s) > 1500 {
		s = "..." + s[len(s)-1500:]
	}
	return s
}

// run starts c and waits for it. Wall time runs from just before the fork to
// the moment the child has exited. The child is left unreaped (waitid with
// WNOWAIT) while its /proc/<pid>/io is read: once reaped, the counters are
// gone, and before it exits they are still moving.
func run(ctx context.Context, c command) (measurement, error) {
	var m measurement
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), c.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// The child's pipes may be held open by a grandchild that outlives it;
	// do not let that hold up the measurement forever.
	cmd.WaitDelay = 10 * time.Second

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return m, fmt.Errorf("start %s: %w", c.argv[0], err)
	}
	pid := cmd.Process.Pid

	var stopSampler func() int64
	if c.sampleTreeRSS {
		stopSampler = proctree.SampleRSS(pid)
	}

	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			_ = cmd.Wait()
			return m, fmt.Errorf("wait for %s: %w", c.argv[0], err)
		}
	}
	m.wall = time.Since(start)
	if stopSampler != nil {
		m.peakTreeRSS = stopSampler()
	}
	io, ioErr := proctree.ReadIO(pid)

	waitErr := cmd.Wait()
	m.stdout, m.stderr = stdout.Bytes(), stderr.Bytes()
	if ioErr != nil {
		return m, ioErr
	}
	m.rchar, m.readBytes = io["rchar"], io["read_bytes"]
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		// Linux reports ru_maxrss of a waited child as the larger of its own
		// and that of any descendant it reaped.
		m.maxRSS = ru.Maxrss * 1024
		m.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	m.exitCode = cmd.ProcessState.ExitCode()
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return m, fmt.Errorf("%s: %w", c.argv[0], waitErr)
	}
	if err := ctx.Err(); err != nil {
		return m, err
	}
	return m, nil
}

// mustSucceed runs c and turns a non-zero exit into an error that shows the
// child's output.
func mustSucceed(ctx context.Context, c command) (measurement, error) {
	m, err := run(ctx, c)
	if err != nil {
		return m, err
	}
	if m.exitCode != 0 {
		return m, fmt.Errorf("%s exited %d:\n%s", strings.Join(c.argv, " "), m.exitCode, m.errorText())
	}
	return m, nil
}
