package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

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
		stopSampler = sampleTreeRSS(pid)
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
	io, ioErr := readProcIO(pid)

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

func readProcIO(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return nil, fmt.Errorf("read I/O counters of pid %d: %w", pid, err)
	}
	return parseProcIO(b)
}

// parseProcIO parses /proc/<pid>/io: "name: value" lines.
func parseProcIO(b []byte) (map[string]int64, error) {
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse /proc io line %q: %w", line, err)
		}
		out[strings.TrimSpace(name)] = n
	}
	if _, ok := out["rchar"]; !ok {
		return nil, fmt.Errorf("no rchar in /proc io counters")
	}
	return out, nil
}

// sampleTreeRSS polls the summed RSS of root and its descendants every
// 50 ms until the returned function is called, which returns the peak.
func sampleTreeRSS(root int) (stop func() int64) {
	done := make(chan struct{})
	var mu sync.Mutex
	var peak int64
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if s := treeRSS(root); s > 0 {
				mu.Lock()
				peak = max(peak, s)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// treeRSS sums the resident set of root and every descendant, from one
// scan of /proc. Processes that vanish mid-scan are skipped.
func treeRSS(root int) int64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	parent := map[int]int{}
	rss := map[int]int64{}
	page := int64(os.Getpagesize())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		ppid, pages, ok := parseStat(b)
		if !ok {
			continue
		}
		parent[pid] = ppid
		rss[pid] = pages * page
	}
	var sum int64
	for pid, r := range rss {
		for p, hops := pid, 0; p > 0 && hops < 64; p, hops = parent[p], hops+1 {
			if p == root {
				sum += r
				break
			}
		}
	}
	return sum
}

// parseStat returns ppid (field 4) and rss in pages (field 24) of a
// /proc/<pid>/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStat(b []byte) (ppid int, rssPages int64, ok bool) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 22 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	rssPages, err2 := strconv.ParseInt(f[21], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return ppid, rssPages, true
}
