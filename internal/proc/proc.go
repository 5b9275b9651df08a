// Package proc runs external tools as child processes: by argv (never
// through a shell), each in its own process group so that cancellation and
// timeouts stop the tool and everything it spawned, with its output appended
// to a log whose last lines explain a failure.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Cmd describes one run of an external tool.
type Cmd struct {
	Argv []string // Argv[0] is looked up on the child's PATH unless it contains a slash
	Dir  string
	Env  []string // the child's full environment; nil inherits ours
	// LogPath receives stdout and stderr, appended; its directory is created.
	LogPath string
	// Stdout is an optional extra sink for the same output (e.g. --verbose).
	// Write errors on it are ignored so a closed terminal cannot kill a step.
	Stdout  io.Writer
	Timeout time.Duration // 0 means none
	Grace   time.Duration // between SIGTERM and SIGKILL; 0 means 5s
	// PeakRSS, when set, is raised to the child's peak resident set in
	// bytes once it exits (wait4's ru_maxrss: the largest of the child and
	// the descendants it waited for), so a step running several tools
	// keeps the largest.
	PeakRSS *atomic.Int64
}

const (
	defaultGrace = 5 * time.Second
	// errorTailLines is how much of the log an ExitError carries.
	errorTailLines = 20
	// pipeDrain bounds how long Run waits for output after the child exits
	// when a helper that escaped the process group still holds the pipe.
	pipeDrain = 2 * time.Second
)

// ExitError describes a tool that did not exit successfully.
type ExitError struct {
	Argv     []string
	Code     int    // exit code; -1 when killed by a signal
	Signal   string // e.g. "SIGKILL" when killed by a signal
	TimedOut bool
	Timeout  time.Duration // the limit that was hit, when TimedOut
	Canceled bool
	LogPath  string
	Tail     []string // last lines this run wrote to the log

	cause error // ctx.Err() when Canceled
}

func (e *ExitError) Error() string {
	var b strings.Builder
	name := toolName(e.Argv)
	switch {
	case e.TimedOut:
		fmt.Fprintf(&b, "%s timed out after %s and was stopped", name, e.Timeout)
	case e.Canceled:
		fmt.Fprintf(&b, "%s was canceled", name)
	case e.Signal == "SIGKILL":
		fmt.Fprintf(&b, "%s was killed by SIGKILL (often the kernel's out-of-memory killer: check free memory or lower -j)", name)
	case e.Signal != "":
		fmt.Fprintf(&b, "%s was killed by %s", name, e.Signal)
	default:
		fmt.Fprintf(&b, "%s exited with code %d", name, e.Code)
	}
	switch {
	case e.LogPath == "":
	case len(e.Tail) == 0:
		fmt.Fprintf(&b, "; it wrote nothing to its log (%s)", e.LogPath)
	default:
		fmt.Fprintf(&b, "; last lines of its log (%s):\n  %s", e.LogPath, strings.Join(e.Tail, "\n  "))
	}
	return b.String()
}

// Unwrap lets errors.Is(err, context.Canceled) see why a tool was stopped.
func (e *ExitError) Unwrap() error { return e.cause }

// NotFoundError reports a tool that cannot be executed at all.
type NotFoundError struct {
	Tool string
	Err  error
}

func (e *NotFoundError) Error() string {
	const fix = "; run `edgepipe doctor` to see which tools are missing and how to install them"
	if strings.Contains(e.Tool, "/") {
		return fmt.Sprintf("%s does not exist or is not executable (%v)%s", e.Tool, e.Err, fix)
	}
	return fmt.Sprintf("%s was not found on PATH%s", e.Tool, fix)
}

func (e *NotFoundError) Unwrap() error { return e.Err }

// Run runs the tool and waits for it and everything it spawned in its
// process group. It returns nil on exit code 0, *NotFoundError when the
// executable is missing, and *ExitError when the tool failed, timed out or
// was canceled.
//
// On cancellation or timeout the whole group gets SIGTERM, then SIGKILL
// after the grace period. Helpers still running when the tool itself exits
// are killed too: nothing a step started outlives the step.
func Run(ctx context.Context, c Cmd) error {
	if len(c.Argv) == 0 {
		return errors.New("proc: no command to run (empty argv)")
	}
	path, err := lookPath(c.Argv[0], c.Dir, c.Env)
	if err != nil {
		return &NotFoundError{Tool: c.Argv[0], Err: err}
	}
	if err := ctx.Err(); err != nil {
		return &ExitError{Argv: c.Argv, Code: -1, Canceled: true, cause: err}
	}

	startWatchdog()
	env, tag := tagEnviron(c.Env)
	cmd := &exec.Cmd{
		Path:        path,
		Args:        c.Argv,
		Dir:         c.Dir,
		Env:         env,
		SysProcAttr: sysProcAttr(),
	}
	var (
		logFile   *os.File
		logOffset int64
	)
	if c.LogPath != "" {
		logFile, logOffset, err = openLog(c.LogPath, c.Argv)
		if err != nil {
			return err
		}
		defer logFile.Close()
	}
	cmd.Stdout = childOutput(c.Stdout, logFile)
	cmd.Stderr = cmd.Stdout
	cmd.WaitDelay = pipeDrain

	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", toolName(c.Argv), err)
	}
	exited, reap := watch(cmd)
	pgid := cmd.Process.Pid
	liveGroups.Store(pgid, struct{}{})
	defer liveGroups.Delete(pgid)

	canceled, timedOut := waitOrStop(ctx, c, exited, pgid)
	// Whatever is left of the group goes now: the tool itself after its
	// grace period, or helpers it left behind.
	signalGroup(pgid, unix.SIGKILL)
	<-exited
	killRun(tag) // helpers that left the group (setsid)
	waitErr := reap()

	state := cmd.ProcessState
	if state == nil {
		return fmt.Errorf("wait for %s: %w", toolName(c.Argv), waitErr)
	}
	if c.PeakRSS != nil {
		rss := maxRSS(state)
		for old := c.PeakRSS.Load(); rss > old && !c.PeakRSS.CompareAndSwap(old, rss); old = c.PeakRSS.Load() {
		}
	}
	if state.Success() && !canceled && !timedOut {
		if waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay) {
			return fmt.Errorf("%s succeeded but its output could not be saved: %w", toolName(c.Argv), waitErr)
		}
		return nil
	}
	e := &ExitError{Argv: c.Argv, Code: state.ExitCode(), TimedOut: timedOut, Canceled: canceled, LogPath: c.LogPath}
	if timedOut {
		e.Timeout = c.Timeout
	}
	if canceled {
		e.cause = ctx.Err()
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = unix.SignalName(ws.Signal())
		if e.Signal == "" {
			e.Signal = ws.Signal().String()
		}
	}
	if c.LogPath != "" {
		e.Tail = tailFrom(c.LogPath, logOffset, errorTailLines)
	}
	return e
}

// childOutput is where the child's stdout and stderr go. A lone *os.File is
// handed to the child as its fd; anything else goes through a pipe that
// os/exec copies (shared by stdout and stderr since they are the same
// writer).
func childOutput(stdout io.Writer, logFile *os.File) io.Writer {
	switch {
	case stdout != nil && logFile != nil:
		return io.MultiWriter(logFile, &tolerantWriter{w: stdout})
	case stdout != nil:
		return &tolerantWriter{w: stdout}
	case logFile != nil:
		return logFile
	}
	return nil
}

// waitOrStop waits for the tool to exit, or for the context or the
// timeout; then the group gets SIGTERM and the grace period to exit.
func waitOrStop(ctx context.Context, c Cmd, exited <-chan struct{}, pgid int) (canceled, timedOut bool) {
	var timeout <-chan time.Time
	if c.Timeout > 0 {
		t := time.NewTimer(c.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-exited:
		return false, false
	case <-ctx.Done():
		canceled = true
	case <-timeout:
		timedOut = true
	}
	signalGroup(pgid, unix.SIGTERM)
	grace := c.Grace
	if grace <= 0 {
		grace = defaultGrace
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
	}
	return canceled, timedOut
}

// liveGroups holds the process group of every child Run is waiting for,
// so a forced exit can take them all down (KillAll).
var liveGroups sync.Map

// KillAll sends SIGKILL to the process group of every child still running.
// It is for a forced exit (a second Ctrl-C), which does not wait for Run
// to clean up: without it, helpers a tool spawned, which Pdeathsig does not
// reach, would outlive edgepipe.
func KillAll() {
	liveGroups.Range(func(pgid, _ any) bool {
		signalGroup(pgid.(int), unix.SIGKILL)
		return true
	})
	killAllTagged()
}

// signalGroup signals every process in the group; a group that is already
// gone is not an error.
func signalGroup(pgid int, sig unix.Signal) {
	_ = unix.Kill(-pgid, sig)
}

// openLog opens the log for appending and writes a header naming the
// command, so a log that collects several attempts stays readable. It
// returns where this run's output starts.
func openLog(path string, argv []string) (*os.File, int64, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, 0, fmt.Errorf("create log directory for %s: %w", toolName(argv), err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("open log for %s: %w", toolName(argv), err)
	}
	if _, err := fmt.Fprintf(f, "$ %s\n", quoteArgv(argv)); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("write log for %s: %w", toolName(argv), err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("write log for %s: %w", toolName(argv), err)
	}
	return f, st.Size(), nil
}

func quoteArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`;&|<>*?()[]{}#~") {
			a = strconv.Quote(a)
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

func toolName(argv []string) string {
	if len(argv) == 0 {
		return "command"
	}
	return filepath.Base(argv[0])
}

// lookPath resolves the executable the way the child's environment would:
// on the PATH in env when env is given, relative to dir when the name has a
// slash. Relative PATH entries are ignored, as os/exec does since Go 1.19,
// so a tool is never picked up from the current directory by accident.
func lookPath(name, dir string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		return abs, checkExecutable(abs)
	}
	pathList, ok := os.LookupEnv("PATH")
	if env != nil {
		pathList, ok = "", false
		for _, kv := range env {
			if v, found := strings.CutPrefix(kv, "PATH="); found {
				pathList, ok = v, true // the last one wins, as in the child
			}
		}
	}
	if ok {
		for _, d := range filepath.SplitList(pathList) {
			if !filepath.IsAbs(d) {
				continue
			}
			p := filepath.Join(d, name)
			if checkExecutable(p) == nil {
				return p, nil
			}
		}
	}
	return "", exec.ErrNotFound
}

func checkExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}

// tolerantWriter drops output once its writer fails, instead of failing
// the child's output pipe.
type tolerantWriter struct {
	w      io.Writer
	broken bool
}

func (t *tolerantWriter) Write(p []byte) (int, error) {
	if !t.broken {
		if _, err := t.w.Write(p); err != nil {
			t.broken = true
		}
	}
	return len(p), nil
}
