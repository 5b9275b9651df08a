package cache

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/digest"
)

// The test binary doubles as a second edgepipe process: with EPCACHE_HELPER
// set, TestMain runs one of these modes instead of the tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv("EPCACHE_HELPER"); mode != "" {
		if err := runHelper(mode, os.Getenv("EPCACHE_ROOT"), os.Getenv("EPCACHE_KEY")); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runHelper(mode, root, key string) error {
	if mode == "exit" {
		return nil
	}
	c, err := Open(root)
	if err != nil {
		return err
	}
	ctx := context.Background()
	switch mode {
	case "lock":
		fmt.Println("waiting")
		release, err := c.Lock(ctx, key)
		if err != nil {
			return err
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin)
		release()
	case "build-once":
		fmt.Println("waiting")
		built, err := buildOnce(ctx, c, key)
		if err != nil {
			return err
		}
		fmt.Println(map[bool]string{true: "built", false: "hit"}[built])
	case "commit-loop":
		n, _ := strconv.Atoi(os.Getenv("EPCACHE_N"))
		fmt.Println("ready")
		for i := range n {
			if _, err := buildOnce(ctx, c, loopKey(i)); err != nil {
				return err
			}
		}
		fmt.Println("done")
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return nil
}

func loopKey(i int) string {
	k, _ := digest.Key("kill-test", i)
	return k
}

// buildOnce is the executor's pattern: lock, look up, build on a miss.
func buildOnce(ctx context.Context, c *Cache, key string) (built bool, err error) {
	release, err := c.Lock(ctx, key)
	if err != nil {
		return false, err
	}
	defer release()
	if _, ok, err := c.Lookup(key); err != nil || ok {
		return false, err
	}
	tmp, err := c.TempDir(key)
	if err != nil {
		return false, err
	}
	for name, data := range expectedFiles(key) {
		p := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return false, err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return false, err
		}
	}
	if _, err := c.Commit(key, tmp, Entry{Kind: "test", StepID: "step-" + key[:8]}); err != nil {
		c.Abort(tmp)
		return false, err
	}
	return true, nil
}

// expectedFiles derives a key's output from the key alone, so a checker can
// tell a complete, correct object from a torn or mixed-up one.
func expectedFiles(key string) map[string][]byte {
	seed := sha256.Sum256([]byte(key))
	r := rand.New(rand.NewChaCha8(seed))
	files := map[string][]byte{}
	for i := range 1 + r.IntN(4) {
		name := fmt.Sprintf("part-%d.bin", i)
		if i%2 == 1 {
			name = "sub/" + name
		}
		data := make([]byte, r.IntN(96<<10))
		for j := 0; j+8 <= len(data); j += 8 {
			binary.LittleEndian.PutUint64(data[j:], r.Uint64())
		}
		files[name] = data
	}
	return files
}

type helperProc struct {
	cmd   *exec.Cmd
	lines chan string
	stdin io.WriteCloser
}

func startHelper(t *testing.T, mode, root, key string, env ...string) *helperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{
		"EPCACHE_HELPER=" + mode, "EPCACHE_ROOT=" + root, "EPCACHE_KEY=" + key,
	}, env...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helperProc{cmd: cmd, lines: make(chan string, 16), stdin: stdin}
	go func() {
		defer close(h.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return h
}

// expect waits for the helper's next line. The limit only keeps a broken
// lock from hanging the test; it never decides a pass.
func (h *helperProc) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case got, ok := <-h.lines:
		if !ok || got != want {
			t.Fatalf("helper said %q (open=%v), want %q", got, ok, want)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("helper never said %q", want)
	}
}

func (h *helperProc) next(t *testing.T) string {
	t.Helper()
	select {
	case got := <-h.lines:
		return got
	case <-time.After(2 * time.Minute):
		t.Fatal("helper went silent")
		return ""
	}
}
