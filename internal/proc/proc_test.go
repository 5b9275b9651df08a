package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as every child process the tests need: with
// childMode set in its environment it runs one of the behaviours below
// instead of the tests.
const childMode = "EDGEPIPE_PROC_TEST_CHILD"

// liveness bounds waits for things that must happen; reaching it means a
// hang, not a slow machine.
const liveness = 30 * time.Second

func TestMain(m *testing.M) {
	if mode := os.Getenv(childMode); mode != "" {
		os.Exit(child(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func child(mode string, args []string) int {
	switch mode {
	case "exit": // exit CODE LINES...: print lines alternately to stdout and stderr
		for i, l := range args[1:] {
			w := os.Stdout
			if i%2 == 1 {
				w = os.Stderr
			}
			fmt.Fprintln(w, l)
		}
		code, _ := strconv.Atoi(args[0])
		return code
	case "alloc": // alloc MIB: touch MIB MiB of memory, then exit
		n, _ := strconv.Atoi(args[0])
		b := make([]byte, n<<20)
		for i := range b {
			b[i] = 1
		}
		fmt.Println(len(b))
		return 0
	case "env": // env NAMES...: print NAME=value per name, then the working directory
		for _, name := range args {
			fmt.Printf("%s=%s\n", name, os.Getenv(name))
		}
		wd, _ := os.Getwd()
		fmt.Printf("cwd=%s\n", wd)
		return 0
	case "hold": // hold PIDFILE [ignore-term]: announce ourselves, then wait to be killed
		if len(args) > 1 && args[1] == "ignore-term" {
			signal.Ignore(syscall.SIGTERM)
		}
		announce(args[0])
		sleepForever()
	case "spawn": // spawn PIDFILE GRANDCHILD-PIDFILE [ignore-term] [exit]: start a TERM-ignoring grandchild
		gc := exec.Command(os.Args[0], args[1], "ignore-term")
		gc.Env = append(os.Environ(), childMode+"=hold")
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 10
		}
		for !exists(args[1]) {
			time.Sleep(5 * time.Millisecond)
		}
		opts := strings.Join(args[2:], " ")
		if strings.Contains(opts, "ignore-term") {
			signal.Ignore(syscall.SIGTERM)
		}
		announce(args[0])
		if strings.Contains(opts, "exit") {
			return 0 // leave the grandchild behind
		}
		sleepForever()
	case "runner": // runner PIDFILE GRANDCHILD-PIDFILE: run a grandchild through Run, as edgepipe would
		announce(args[0])
		err := Run(context.Background(), Cmd{
			Argv: []string{os.Args[0], args[1], "ignore-term"},
			Env:  append(os.Environ(), childMode+"=hold"),
		})
		fmt.Fprintln(os.Stderr, err)
		return 1
	case "family": // family PIDFILE HELPER-PIDFILE SETSID-PIDFILE [exit]: a helper in the group and one that left it
		for i, pidFile := range args[1:3] {
			h := exec.Command(os.Args[0], pidFile, "ignore-term")
			h.Env = append(os.Environ(), childMode+"=hold")
			if i == 1 {
				h.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			}
			if err := h.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 10
			}
			for !exists(pidFile) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		announce(args[0])
		if len(args) > 3 && args[3] == "exit" {
			return 0
		}
		sleepForever()
	case "runner-family": // runner-family RUNNER-PIDFILE FAMILY ARGS...: run a family through Run
		announce(args[0])
		err := Run(context.Background(), Cmd{
			Argv: append([]string{os.Args[0]}, args[1:]...),
			Env:  append(os.Environ(), childMode+"=family"),
		})
		fmt.Fprintln(os.Stderr, err)
		return 1
	case "selfkill":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		sleepForever()
	}
	fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
	return 99
}

func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// announce writes our pid to path atomically, so a reader never sees half.
func announce(path string) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		panic(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		panic(err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// self returns a Cmd that re-executes the test binary in the given mode.
func self(mode string, args ...string) Cmd {
	return Cmd{
		Argv: append([]string{os.Args[0]}, args...),
		Env:  append(os.Environ(), childMode+"="+mode),
	}
}

// waitPid waits for a child to announce itself and makes sure it does not
// outlive the test even if the test fails.
func waitPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil {
			pid, err := strconv.Atoi(string(b))
			if err != nil {
				t.Fatalf("pid file %s: %v", path, err)
			}
			t.Cleanup(func() {
				if !gone(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no process announced itself in %s", path)
	return 0
}

// gone reports whether pid has died. A zombie counts as dead: it runs no
// code, and whether something reaps it is up to init, not us.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name, which is in parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

func requireGone(t *testing.T, what string, pid int) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) is still running", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExitCodeAndLogTail(t *testing.T) {
	t.Parallel()
	logPath := filepath.Join(t.TempDir(), "logs", "nested", "quantize.log")
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf("line %02d", i))
	}
	c := self("exit", append([]string{"3"}, lines...)...)
	c.LogPath = logPath
	err := Run(context.Background(), c)

	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Run = %v, want *ExitError", err)
	}
	if ee.Code != 3 || ee.Signal != "" || ee.TimedOut || ee.Canceled || ee.LogPath != logPath {
		t.Errorf("ExitError = %+v", ee)
	}
	if len(ee.Tail) != errorTailLines || ee.Tail[0] != "line 10" || ee.Tail[len(ee.Tail)-1] != "line 29" {
		t.Errorf("Tail = %q", ee.Tail)
	}
	want := fmt.Sprintf("%s exited with code 3; last lines of its log (%s):\n  line 10\n", filepath.Base(os.Args[0]), logPath)
	if msg := err.Error(); !strings.HasPrefix(msg, want) {
		t.Errorf("message:\n%s\nwant prefix:\n%s", msg, want)
	}
	log, _ := os.ReadFile(logPath)
	if !strings.HasPrefix(string(log), "$ "+os.Args[0]+" 3 \"line 00\"") || !strings.Contains(string(log), "line 00\nline 01\n") {
		t.Errorf("log does not hold the command and both streams:\n%s", log)
	}
}

func TestSuccessWithExtraSink(t *testing.T) {
	t.Parallel()
	logPath := filepath.Join(t.TempDir(), "ok.log")
	var sink bytes.Buffer
	c := self("exit", "0", "to stdout", "to stderr")
	c.LogPath = logPath
	c.Stdout = &sink
	if err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if sink.String() != "to stdout\nto stderr\n" {
		t.Errorf("sink got %q", sink.String())
	}
	if log, _ := os.ReadFile(logPath); !strings.HasSuffix(string(log), "to stdout\nto stderr\n") {
		t.Errorf("log got %q", log)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("terminal closed") }

func TestBrokenSinkDoesNotFailTool(t *testing.T) {
	t.Parallel()
	logPath := filepath.Join(t.TempDir(), "ok.log")
	c := self("exit", "0", "a", "b", "c")
	c.LogPath = logPath
	c.Stdout = failingWriter{}
	if err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if log, _ := os.ReadFile(logPath); !strings.HasSuffix(string(log), "a\nb\nc\n") {
		t.Errorf("log got %q", log)
	}
}

func TestTailOnlyThisRun(t *testing.T) {
	t.Parallel()
	logPath := filepath.Join(t.TempDir(), "retry.log")
	for _, word := range []string{"first-attempt", "second-attempt"} {
		c := self("exit", "1", word)
		c.LogPath = logPath
		err := Run(context.Background(), c)
		var ee *ExitError
		if !errors.As(err, &ee) || len(ee.Tail) != 1 || ee.Tail[0] != word {
			t.Errorf("run printing %s: Tail = %q (err %v)", word, ee.Tail, err)
		}
	}
	if log, _ := os.ReadFile(logPath); !strings.Contains(string(log), "first-attempt") {
		t.Errorf("the second run truncated the log:\n%s", log)
	}
	c := self("exit", "1")
	c.LogPath = logPath
	if err := Run(context.Background(), c); !strings.Contains(err.Error(), "wrote nothing to its log") {
		t.Errorf("silent failure message: %v", err)
	}
}

func TestEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "env.log")
	c := self("env", "EDGEPIPE_PROC_VALUE", "EDGEPIPE_PROC_INHERITED")
	c.Env = append(c.Env, "EDGEPIPE_PROC_VALUE=given explicitly")
	c.Dir = dir
	c.LogPath = logPath
	if err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(logPath)
	for _, want := range []string{"EDGEPIPE_PROC_VALUE=given explicitly\n", "EDGEPIPE_PROC_INHERITED=\n", "cwd=" + dir + "\n"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}

	// nil Env inherits ours.
	t.Setenv(childMode, "env")
	t.Setenv("EDGEPIPE_PROC_INHERITED", "from the parent")
	inherit := filepath.Join(dir, "inherit.log")
	if err := Run(context.Background(), Cmd{Argv: []string{os.Args[0], "EDGEPIPE_PROC_INHERITED"}, LogPath: inherit}); err != nil {
		t.Fatal(err)
	}
	if log, _ := os.ReadFile(inherit); !strings.Contains(string(log), "EDGEPIPE_PROC_INHERITED=from the parent\n") {
		t.Errorf("inherited environment missing:\n%s", log)
	}
}

func TestMissingExecutable(t *testing.T) {
	t.Parallel()
	err := Run(context.Background(), Cmd{Argv: []string{"llama-quantize-not-installed", "in.gguf"}})
	var nf *NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("Run = %v, want *NotFoundError wrapping exec.ErrNotFound", err)
	}
	for _, want := range []string{"llama-quantize-not-installed was not found on PATH", "run `edgepipe doctor`"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	err = Run(context.Background(), Cmd{Argv: []string{"/nonexistent/bin/llama-quantize"}})
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "/nonexistent/bin/llama-quantize does not exist") {
		t.Errorf("Run with a missing path = %v", err)
	}
}

// TestLookupUsesChildPath: a tool is found on the PATH the child will have,
// which is how a pinned toolchain's bin directory is put first.
func TestLookupUsesChildPath(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	if err := os.Symlink(os.Args[0], filepath.Join(bin, "edgepipe-fake-tool")); err != nil {
		t.Fatal(err)
	}
	env := []string{childMode + "=exit", "PATH=relative/dir" + string(filepath.ListSeparator) + bin}
	if err := Run(context.Background(), Cmd{Argv: []string{"edgepipe-fake-tool", "0"}, Env: env}); err != nil {
		t.Fatalf("tool on the child's PATH: %v", err)
	}
	env = []string{childMode + "=exit", "PATH=/nonexistent"}
	if err := Run(context.Background(), Cmd{Argv: []string{"edgepipe-fake-tool", "0"}, Env: env}); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("tool absent from the child's PATH: %v", err)
	}
}

// TestCancelKillsGroup: canceling kills the tool and a grandchild that
// ignores SIGTERM, whether the tool itself obeys SIGTERM or not.
func TestCancelKillsGroup(t *testing.T) {
	for _, tc := range []struct{ name, childOpts string }{
		{"child obeys TERM", ""},
		{"child ignores TERM", "ignore-term"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			childPid, grandPid := filepath.Join(dir, "child.pid"), filepath.Join(dir, "grandchild.pid")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := self("spawn", childPid, grandPid, tc.childOpts)
			c.Grace = 100 * time.Millisecond
			done := make(chan error, 1)
			go func() { done <- Run(ctx, c) }()

			child, grand := waitPid(t, childPid), waitPid(t, grandPid)
			cancel()
			var err error
			select {
			case err = <-done:
			case <-time.After(liveness):
				t.Fatal("Run did not return after cancel")
			}
			var ee *ExitError
			if !errors.As(err, &ee) || !ee.Canceled || !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want a canceled *ExitError", err)
			}
			if !strings.Contains(err.Error(), "was canceled") {
				t.Errorf("message: %v", err)
			}
			requireGone(t, "child", child)
			requireGone(t, "grandchild", grand)
		})
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "hold.pid")
	c := self("hold", pidFile)
	c.Timeout = 300 * time.Millisecond
	err := Run(context.Background(), c)
	var ee *ExitError
	if !errors.As(err, &ee) || !ee.TimedOut || ee.Canceled || ee.Signal != "SIGTERM" {
		t.Fatalf("Run = %v (%+v), want a timeout ended by SIGTERM", err, ee)
	}
	if !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Errorf("message: %v", err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a tool timeout must not look like a canceled run: %v", err)
	}
}

// TestHelpersDieWithTool: a tool that exits and leaves a helper behind
// succeeds, and the helper is gone.
func TestHelpersDieWithTool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	grandPid := filepath.Join(dir, "grandchild.pid")
	c := self("spawn", filepath.Join(dir, "child.pid"), grandPid, "exit")
	c.Stdout = &bytes.Buffer{} // exercise the pipe path too
	if err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	requireGone(t, "left-behind grandchild", waitPid(t, grandPid))
}

func TestKilledBySignal(t *testing.T) {
	t.Parallel()
	err := Run(context.Background(), self("selfkill"))
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Signal != "SIGKILL" || ee.Code != -1 {
		t.Fatalf("Run = %v, want killed by SIGKILL", err)
	}
	if !strings.Contains(err.Error(), "killed by SIGKILL (often the kernel's out-of-memory killer") {
		t.Errorf("message: %v", err)
	}
}

func TestAlreadyCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	logPath := filepath.Join(t.TempDir(), "never.log")
	c := self("exit", "0")
	c.LogPath = logPath
	if err := Run(ctx, c); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want canceled", err)
	}
	if exists(logPath) {
		t.Errorf("a canceled run created its log")
	}
}

func TestEmptyArgv(t *testing.T) {
	t.Parallel()
	if err := Run(context.Background(), Cmd{}); err == nil {
		t.Error("Run with no argv succeeded")
	}
}

func TestQuoteArgv(t *testing.T) {
	t.Parallel()
	got := quoteArgv([]string{"llama-quantize", "in put.gguf", "", "Q4_K_M", "a$b"})
	if want := `llama-quantize "in put.gguf" "" Q4_K_M "a$b"`; got != want {
		t.Errorf("quoteArgv = %s, want %s", got, want)
	}
}

// PeakRSS is raised to at least what the child touched, and kept at the
// largest of several runs.
func TestPeakRSS(t *testing.T) {
	var peak atomic.Int64
	for _, mib := range []string{"64", "8"} {
		c := self("alloc", mib)
		c.LogPath = filepath.Join(t.TempDir(), "log")
		c.PeakRSS = &peak
		if err := Run(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	if got := peak.Load(); got < 64<<20 || got > 1<<30 {
		t.Fatalf("peak RSS %d bytes after a child touched 64 MiB", got)
	}
}
