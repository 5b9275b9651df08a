//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package manifest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the child process the kill tests run: with
// childEnv set it publishes instead of running tests.
const childEnv = "EDGEPIPE_MANIFEST_TEST_CHILD"

func TestMain(m *testing.M) {
	switch mode := os.Getenv(childEnv); mode {
	case "":
		os.Exit(m.Run())
	case "crash":
		childCrash()
	case "loop":
		childLoop()
	case "wait":
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childEnv, mode)
		os.Exit(2)
	}
}

func childSetup() (final string) {
	if os.Getenv("NOSWAP") != "" {
		swap = func(a, b string) error { return errSwapUnsupported }
	}
	return os.Getenv("FINAL")
}

// childCrash publishes VERSION and SIGKILLs itself at crash point POINT.
func childCrash() {
	final := childSetup()
	staging, err := stageVersion(final, os.Getenv("VERSION"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	point := os.Getenv("POINT")
	crashPoint = func(p string) {
		if p == point {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	if err := Publish(staging, final); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// childLoop publishes PREFIX-000000, PREFIX-000001, ... until killed, and
// acknowledges each completed publish on stdout.
func childLoop() {
	final := childSetup()
	fmt.Println("ready")
	for i := 0; ; i++ {
		version := fmt.Sprintf("%s-%06d", os.Getenv("PREFIX"), i)
		staging, err := stageVersion(final, version)
		if err == nil {
			err = Publish(staging, final)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("published", version)
	}
}

// stageVersion stages a complete artifact whose every file derives from version.
func stageVersion(final, version string) (string, error) {
	staging, err := Stage(final)
	if err != nil {
		return "", err
	}
	files := map[string][]byte{
		"model.gguf":       modelBytes(version),
		"version.txt":      []byte(version),
		"logs/convert.log": []byte("converted " + version + "\n"),
	}
	for rel, data := range files {
		p := filepath.Join(staging, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return "", err
		}
	}
	m := &Manifest{
		EdgepipeVersion: "test",
		Recipe:          Recipe{Name: "r"},
		Target:          Target{Name: filepath.Base(final), Device: "x86-laptop", Format: "gguf-q8_0"},
		Source:          Source{URI: "builtin:test"},
		Steps:           []Step{{ID: "convert", Kind: "gguf-convert", KindVersion: 1, Argv: [][]string{{"stand-in", version}}, CacheKey: "k", StandIn: true}},
	}
	return staging, Write(staging, m)
}

// modelBytes is large enough that hashing and syncing it take a while, so
// random kills land inside Publish.
func modelBytes(version string) []byte {
	sum := sha256.Sum256([]byte(version))
	return []byte(strings.Repeat(string(sum[:]), 256<<10/len(sum)))
}

// checkFinal requires dir to be one complete artifact and returns its version.
func checkFinal(t *testing.T, dir string) string {
	t.Helper()
	problems, err := Verify(dir)
	if err != nil {
		t.Fatalf("verify %s: %v", dir, err)
	}
	if len(problems) > 0 {
		t.Fatalf("verify %s: %v", dir, problems)
	}
	m, err := Read(dir)
	must(t, err)
	var paths []string
	for _, f := range m.Files {
		paths = append(paths, f.Path)
	}
	if want := []string{"logs/convert.log", "model.gguf", "version.txt"}; !reflect.DeepEqual(paths, want) {
		t.Fatalf("%s lists %v, want %v", dir, paths, want)
	}
	version, err := os.ReadFile(filepath.Join(dir, "version.txt"))
	must(t, err)
	model, err := os.ReadFile(filepath.Join(dir, "model.gguf"))
	must(t, err)
	if string(model) != string(modelBytes(string(version))) {
		t.Fatalf("%s mixes versions: model.gguf is not the one of %s", dir, version)
	}
	return string(version)
}

// leftovers lists the in-flight siblings in parent.
func leftovers(t *testing.T, parent string) []string {
	t.Helper()
	des, err := os.ReadDir(parent)
	must(t, err)
	var names []string
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".") {
			names = append(names, de.Name())
		}
	}
	return names
}

func publishVersion(t *testing.T, final, version string) {
	t.Helper()
	staging, err := stageVersion(final, version)
	must(t, err)
	must(t, Publish(staging, final))
}

func withoutSwap(t *testing.T) {
	saved := swap
	swap = func(a, b string) error { return errSwapUnsupported }
	t.Cleanup(func() { swap = saved })
}

func eachMode(t *testing.T, f func(t *testing.T, noswap bool)) {
	t.Run("swap", func(t *testing.T) {
		if err := swapDirs(t.TempDir(), t.TempDir()); err != nil {
			t.Skipf("this file system cannot swap folders: %v", err)
		}
		f(t, false)
	})
	t.Run("two-renames", func(t *testing.T) {
		withoutSwap(t)
		f(t, true)
	})
}

func TestPublishNewAndReplace(t *testing.T) {
	eachMode(t, func(t *testing.T, noswap bool) {
		parent := filepath.Join(t.TempDir(), "recipe")
		final := filepath.Join(parent, "target")
		publishVersion(t, final, "v1")
		if got := checkFinal(t, final); got != "v1" {
			t.Fatalf("published %s, want v1", got)
		}
		publishVersion(t, final, "v2")
		if got := checkFinal(t, final); got != "v2" {
			t.Fatalf("after replace: %s, want v2", got)
		}
		if l := leftovers(t, parent); len(l) > 0 {
			t.Errorf("leftovers after a clean publish: %v", l)
		}
	})
}

func TestPublishRefuses(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "recipe")
	final := filepath.Join(parent, "target")
	publishVersion(t, final, "v1")

	t.Run("staged folder differs from its manifest", func(t *testing.T) {
		staging, err := stageVersion(final, "v2")
		must(t, err)
		must(t, os.WriteFile(filepath.Join(staging, "late.log"), []byte("x"), 0o644))
		err = Publish(staging, final)
		if err == nil || !strings.Contains(err.Error(), "late.log is not listed in the manifest") {
			t.Fatalf("Publish error = %v", err)
		}
		must(t, os.RemoveAll(staging))
	})
	t.Run("staging not made by Stage", func(t *testing.T) {
		other := t.TempDir()
		writeTree(t, other, map[string]string{"model.gguf": "x"})
		must(t, Write(other, fullManifest()))
		err := Publish(other, final)
		if err == nil || !strings.Contains(err.Error(), "create one with manifest.Stage") {
			t.Fatalf("Publish error = %v", err)
		}
	})
	t.Run("staging of another target", func(t *testing.T) {
		staging, err := stageVersion(filepath.Join(parent, "other"), "v2")
		must(t, err)
		defer os.RemoveAll(staging)
		if err := Publish(staging, final); err == nil {
			t.Fatal("published another target's staging folder")
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		staging, err := stageVersion(final, "v2")
		must(t, err)
		defer os.RemoveAll(staging)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := PublishContext(ctx, staging, final); !errors.Is(err, context.Canceled) {
			t.Fatalf("PublishContext error = %v, want context.Canceled", err)
		}
	})
	t.Run("dot name", func(t *testing.T) {
		if _, err := Stage(filepath.Join(parent, ".hidden")); err == nil {
			t.Fatal("staged a folder whose name starts with a dot")
		}
	})
	t.Run("file in the way", func(t *testing.T) {
		file := filepath.Join(parent, "file")
		must(t, os.WriteFile(file, nil, 0o644))
		staging, err := stageVersion(file, "v2")
		must(t, err)
		defer os.RemoveAll(staging)
		if err := Publish(staging, file); err == nil || !strings.Contains(err.Error(), "not a folder") {
			t.Fatalf("Publish error = %v", err)
		}
	})
	if got := checkFinal(t, final); got != "v1" {
		t.Errorf("refused publishes changed the folder to %s", got)
	}
}

// TestPublishKilledAtEachPoint kills a publishing child at every step of the
// protocol and checks that both repairs (CleanStale, or simply the next
// Publish) leave a complete folder and no leftovers.
func TestPublishKilledAtEachPoint(t *testing.T) {
	tests := []struct {
		noswap   bool
		existing bool
		point    string
		want     string // after CleanStale: "v1" (old), "v2" (new) or "" (absent)
	}{
		{existing: true, point: "verified", want: "v1"},
		{existing: true, point: "locked", want: "v1"},
		{existing: true, point: "swapped", want: "v2"},
		{existing: true, point: "synced", want: "v2"},
		{noswap: true, existing: true, point: "verified", want: "v1"},
		{noswap: true, existing: true, point: "locked", want: "v1"},
		{noswap: true, existing: true, point: "aside", want: "v1"},
		{noswap: true, existing: true, point: "renamed", want: "v2"},
		{noswap: true, existing: true, point: "synced", want: "v2"},
		{point: "verified", want: ""},
		{point: "locked", want: ""},
		{point: "renamed", want: "v2"},
		{point: "synced", want: "v2"},
	}
	for _, tt := range tests {
		for _, repair := range []string{"CleanStale", "Publish"} {
			name := fmt.Sprintf("existing=%v/noswap=%v/%s/%s", tt.existing, tt.noswap, tt.point, repair)
			t.Run(name, func(t *testing.T) {
				if tt.noswap {
					withoutSwap(t)
				} else if err := swapDirs(t.TempDir(), t.TempDir()); err != nil && tt.existing {
					t.Skipf("this file system cannot swap folders: %v", err)
				}
				parent := filepath.Join(t.TempDir(), "recipe")
				final := filepath.Join(parent, "target")
				if tt.existing {
					publishVersion(t, final, "v1")
				}
				runCrashChild(t, final, "v2", tt.point, tt.noswap)

				// Before any repair a reader finds a complete folder or none,
				// and none only where the old one waits to be restored.
				if _, err := os.Stat(final); err == nil {
					checkFinal(t, final)
				} else if tt.existing && !slices.ContainsFunc(leftovers(t, parent), func(n string) bool { return strings.HasPrefix(n, ".target.old-") }) {
					t.Fatalf("the folder is gone and no .old- sibling holds it: %v", leftovers(t, parent))
				}

				if repair == "CleanStale" {
					must(t, CleanStale(parent))
					if tt.want == "" {
						if _, err := os.Stat(final); !errors.Is(err, os.ErrNotExist) {
							t.Fatalf("folder exists after a publish killed before its rename: %v", err)
						}
					} else if got := checkFinal(t, final); got != tt.want {
						t.Fatalf("after CleanStale the folder is %s, want %s", got, tt.want)
					}
				} else {
					publishVersion(t, final, "v3")
					if got := checkFinal(t, final); got != "v3" {
						t.Fatalf("after the next Publish the folder is %s, want v3", got)
					}
				}
				if l := leftovers(t, parent); len(l) > 0 {
					t.Errorf("leftovers after repair: %v", l)
				}
			})
		}
	}
}

func runCrashChild(t *testing.T, final, version, point string, noswap bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=crash", "FINAL="+final, "VERSION="+version, "POINT="+point)
	if noswap {
		cmd.Env = append(cmd.Env, "NOSWAP=1")
	}
	out, err := cmd.CombinedOutput()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die at %q (err %v): %s", point, err, out)
	}
}

// TestPublishSurvivesRandomKills SIGKILLs a child that publishes in a loop at
// random moments, many times. After every kill the folder must be complete
// and be the last acknowledged version or the one in flight, never older and
// never a mix; after CleanStale nothing may be left over.
func TestPublishSurvivesRandomKills(t *testing.T) {
	rounds := 30
	if testing.Short() {
		rounds = 8
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	eachMode(t, func(t *testing.T, noswap bool) {
		rng := rand.New(rand.NewPCG(seed, 1))
		parent := filepath.Join(t.TempDir(), "recipe")
		final := filepath.Join(parent, "target")
		publishVersion(t, final, "init")
		last := "init"
		var inflightWon, absent, dirty int
		for round := range rounds {
			prefix := fmt.Sprintf("r%03d", round)
			acked := runLoopChild(t, final, prefix, noswap, time.Duration(rng.Int64N(int64(30*time.Millisecond))))
			if len(acked) > 0 {
				last = acked[len(acked)-1]
			}
			inflight := fmt.Sprintf("%s-%06d", prefix, len(acked))

			if _, err := os.Stat(final); err == nil {
				if got := checkFinal(t, final); got != last && got != inflight {
					t.Fatalf("round %d: folder is %s, want %s or %s", round, got, last, inflight)
				}
			} else {
				absent++
				if !noswap {
					t.Fatalf("round %d: the folder vanished although folders are swapped atomically", round)
				}
			}
			if len(leftovers(t, parent)) > 0 {
				dirty++
			}
			must(t, CleanStale(parent))
			got := checkFinal(t, final)
			if got != last && got != inflight {
				t.Fatalf("round %d: after CleanStale the folder is %s, want %s or %s", round, got, last, inflight)
			}
			if got == inflight {
				inflightWon++
			}
			last = got
			if l := leftovers(t, parent); len(l) > 0 {
				t.Fatalf("round %d: leftovers after CleanStale: %v", round, l)
			}
		}
		t.Logf("%d rounds: in-flight version won %d, folder absent before repair %d, leftovers before repair %d", rounds, inflightWon, absent, dirty)
	})
}

// runLoopChild starts a publishing loop, kills it after delay and returns the
// versions it acknowledged.
func runLoopChild(t *testing.T, final, prefix string, noswap bool, delay time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=loop", "FINAL="+final, "PREFIX="+prefix)
	if noswap {
		cmd.Env = append(cmd.Env, "NOSWAP=1")
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child did not start: %s", stderr.String())
	}
	time.Sleep(delay)
	must(t, cmd.Process.Kill())
	var acked []string
	for lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), "published "); ok {
			acked = append(acked, v)
		}
	}
	err = cmd.Wait()
	if ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() {
		t.Fatalf("child exited on its own (%v): %s", err, stderr.String())
	}
	return acked
}

func TestConcurrentPublishers(t *testing.T) {
	eachMode(t, func(t *testing.T, noswap bool) {
		parent := filepath.Join(t.TempDir(), "recipe")
		final := filepath.Join(parent, "target")
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for w := range 2 {
			wg.Go(func() {
				for i := range 10 {
					staging, err := stageVersion(final, fmt.Sprintf("w%d-%02d", w, i))
					if err == nil {
						err = Publish(staging, final)
					}
					if err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if got := checkFinal(t, final); got != "w0-09" && got != "w1-09" {
			t.Errorf("final version %s is not one publisher's last", got)
		}
		if l := leftovers(t, parent); len(l) > 0 {
			t.Errorf("leftovers: %v", l)
		}
	})
}

// TestCleanStaleKeepsLiveStaging: a staging folder whose process still runs
// may be half filled by it and must survive; once it died, it goes.
func TestCleanStaleKeepsLiveStaging(t *testing.T) {
	parent := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=wait")
	stdin, err := cmd.StdinPipe()
	must(t, err)
	must(t, cmd.Start())
	staging := filepath.Join(parent, fmt.Sprintf(".target.tmp-%d-0123456789abcdef", cmd.Process.Pid))
	writeTree(t, staging, map[string]string{"model.gguf": "half"})
	unrelated := filepath.Join(parent, ".target.tmp-notapid")
	must(t, os.Mkdir(unrelated, 0o755))

	must(t, CleanStale(parent))
	if _, err := os.Stat(staging); err != nil {
		t.Fatalf("CleanStale removed a live process's staging folder: %v", err)
	}
	stdin.Close()
	must(t, cmd.Wait())
	must(t, CleanStale(parent))
	if _, err := os.Stat(staging); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("CleanStale kept a dead process's staging folder: %v", err)
	}
	if _, err := os.Stat(unrelated); err != nil {
		t.Errorf("CleanStale removed a folder that is not one of its siblings: %v", err)
	}
	if err := CleanStale(filepath.Join(parent, "absent")); err != nil {
		t.Errorf("CleanStale of a missing parent: %v", err)
	}
}
