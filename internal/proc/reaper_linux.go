//go:build linux

package proc

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A helper a tool starts with setsid leaves the tool's process group, so
// signalling the group misses it, and when edgepipe is killed with SIGKILL
// Pdeathsig reaches only the tool itself. What every descendant keeps,
// unless it clears its environment, is the environment: each Run tags its
// tool with tagEnv=<this process's prefix><run number>, and what carries a
// tag is found in /proc and killed when its tool ends, when edgepipe exits,
// and, if edgepipe is killed, by a watchdog: this same binary, started once,
// which waits for edgepipe's end on a pipe and then kills every process
// tagged with its prefix.
//
// The watchdog is told so by its arguments, not its environment (which a
// CI job or a user sets for edgepipe too: a variable that turned any
// edgepipe into a watchdog made `run` do nothing and exit 0), and only
// believes them when its parent is the process the prefix names and its
// stdin is a pipe.
const (
	tagEnv      = "EDGEPIPE_PROC_TAG"
	watchdogArg = "__edgepipe-proc-watchdog"
)

var (
	// tagPrefix is unique to this process: pid and start time.
	tagPrefix = fmt.Sprintf("%d.%d.", os.Getpid(), time.Now().UnixNano())
	runSeq    atomic.Int64
	watchOnce sync.Once
	// tagPrefixRE is what a watchdog accepts: never a prefix that could
	// match every tag.
	tagPrefixRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.$`)
)

func init() {
	// The watchdog's arguments never fall through to the program: a
	// watchdog whose parent died before it looked (a SIGKILL right after
	// the start) must still clean up, and a binary that is more than
	// edgepipe (a test binary) must not run itself instead.
	if len(os.Args) >= 2 && os.Args[1] == watchdogArg {
		if len(os.Args) == 3 && isWatchdog(os.Args[2]) {
			os.Exit(watchdog(os.Args[2]))
		}
		fmt.Fprintf(os.Stderr, "%s is edgepipe's own child process, started with a pipe on stdin: not a command\n", watchdogArg)
		os.Exit(2)
	}
}

// isWatchdog reports whether this process is the watchdog startWatchdog
// started: the prefix is a tag prefix (pid and start time), and stdin is
// a pipe whose write end its parent holds (or held: the parent may be
// dead already, which is the watchdog's cue). Its parent is not checked:
// by the time the watchdog looks, a killed parent is gone.
func isWatchdog(prefix string) bool {
	if !tagPrefixRE.MatchString(prefix) {
		return false
	}
	st, err := os.Stdin.Stat()
	return err == nil && st.Mode()&os.ModeNamedPipe != 0
}

// tagEnviron returns env (nil: ours) with a fresh tag for one Run added,
// and the tag. Tags accumulate: an edgepipe run by a step of another
// keeps the outer tag, so the outer run still finds what the inner left.
func tagEnviron(env []string) ([]string, string) {
	if env == nil {
		env = os.Environ()
	}
	tag := tagPrefix + strconv.FormatInt(runSeq.Add(1), 10)
	out := make([]string, 0, len(env)+1)
	tags := tag
	for _, kv := range env {
		if outer, ok := strings.CutPrefix(kv, tagEnv+"="); ok {
			if outer != "" {
				tags = outer + " " + tag
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, tagEnv+"="+tags), tag
}

// startWatchdog starts the watchdog once per process; if it cannot, runs
// go on without it (a SIGKILL of edgepipe may then leave setsid helpers).
func startWatchdog() {
	watchOnce.Do(func() {
		// /proc/PID/task/TID/children needs CONFIG_PROC_CHILDREN; without
		// it killRun falls back to scanning /proc every time.
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children"); err == nil {
			if unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == nil {
				subreaper.Store(true)
			}
		}
		exe, err := os.Executable()
		if err != nil {
			return
		}
		r, w, err := os.Pipe()
		if err != nil {
			return
		}
		cmd := exec.Command(exe, watchdogArg, tagPrefix)
		cmd.Stdin = r
		// Its own group: a terminal's Ctrl-C must not take it down first.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			r.Close()
			w.Close()
			return
		}
		r.Close()
		watchdogPid.Store(int64(cmd.Process.Pid))
		// w stays open, unwritten, for this process's life: its end
		// (exit, crash or SIGKILL) is the watchdog's EOF.
		watchdogPipe = w
		go cmd.Wait()
	})
}

// watchdogPipe keeps the pipe's write end referenced (an unreferenced
// *os.File is closed by its finalizer, which would wake the watchdog).
//
//lint:ignore U1000 held, never read: see above
var watchdogPipe *os.File

// watchdog waits for the parent's end, then kills what it left.
func watchdog(prefix string) int {
	io.Copy(io.Discard, os.Stdin)
	killTagged(prefix, true)
	return 0
}

// killTagged kills every process whose environment carries the tag (or,
// with prefix, any tag starting with it), until none is left (a dying
// helper may still fork).
func killTagged(tag string, prefix bool) {
	self := os.Getpid()
	for round := 0; round < 50; round++ {
		found := 0
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			if tagged(pid, tag, prefix) {
				found++
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		if found == 0 {
			return
		}
		time.Sleep(time.Duration(round+1) * 2 * time.Millisecond)
	}
}

// tagged reports whether pid's environment carries tag. A zombie has no
// environment left to read.
func tagged(pid int, tag string, prefix bool) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	key := []byte(tagEnv + "=")
	for len(b) > 0 {
		entry, rest, _ := bytes.Cut(b, []byte{0})
		b = rest
		if !bytes.HasPrefix(entry, key) {
			continue
		}
		for _, t := range strings.Fields(string(entry[len(key):])) {
			if t == tag || prefix && strings.HasPrefix(t, tag) {
				return true
			}
		}
	}
	return false
}

// killRun kills what one Run's tool left behind outside its group. This
// process is a child subreaper (set with the watchdog), so a helper that
// left the group and whose parent has exited is now our child: scanning all
// of /proc is needed only when a child of ours carries the run's tag, which
// keeps the common case (nothing escaped) to reading our children's list.
//
// Being a subreaper also makes every orphan of a tool's group ours to reap
// (a grandchild killed with its group is reparented here as a zombie), so
// the scan reaps those too.
func killRun(tag string) {
	if !subreaper.Load() {
		killTagged(tag, false)
		return
	}
	var escaped []int
	dog := int(watchdogPid.Load())
	for _, pid := range children() {
		switch {
		case pid == dog:
		case tagged(pid, tag, false):
			escaped = append(escaped, pid)
		default:
			reapOrphan(pid)
		}
	}
	if len(escaped) == 0 {
		return
	}
	killTagged(tag, false)
	for _, pid := range escaped {
		// Reparented to us, so ours to reap once the SIGKILL lands.
		reap(pid)
	}
}

// reapOrphan reaps pid, a child of ours, if it is an orphan reparented to
// us rather than a process this program started: those are process-group
// leaders (Run's tools, the watchdog) or share our group (other os/exec
// children), and os/exec reaps them; an orphan of a tool's group is
// neither. A setsid helper is a group leader too: Run's tag finds those
// while they live (a zombie one that exited on its own waits for our exit).
func reapOrphan(pid int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil || pgrp == pid || pgrp == unix.Getpgrp() {
		return
	}
	reap(pid)
}

// reaping holds the orphans a goroutine is waiting for, so a later scan
// does not start a second wait.
var reaping sync.Map

func reap(pid int) {
	if _, dup := reaping.LoadOrStore(pid, struct{}{}); dup {
		return
	}
	go func() {
		defer reaping.Delete(pid)
		for {
			if _, err := unix.Wait4(pid, nil, 0, nil); err != unix.EINTR {
				return
			}
		}
	}()
}

// subreaper records that orphaned descendants reparent to this process.
var subreaper atomic.Bool

// watchdogPid is the watchdog's pid, a child killRun need not look at.
var watchdogPid atomic.Int64

// children lists the orphans reparented to this process: Linux gives an
// orphan to the subreaper's first live thread, the group leader (Go never
// ends its main thread), so only the leader's list is read; children a
// thread forked itself are os/exec's to wait for. Raw syscalls, since
// os.Open would register each /proc file with the poller first.
func children() []int {
	path := "/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children"
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var buf []byte
	chunk := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, chunk)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		buf = append(buf, chunk[:n]...)
	}
	var out []int
	for _, f := range strings.Fields(string(buf)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// killAllTagged kills what every Run of this process left.
func killAllTagged() { killTagged(tagPrefix, true) }
