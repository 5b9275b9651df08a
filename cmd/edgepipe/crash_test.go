package main

import (
	"bytes"
	"crypto/rand"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/standins" // every family's stand-ins
)

// binDir makes a folder where edgepipe and every stand-in are links to
// this test binary, which acts as the command its name says (TestMain).
func binDir(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	names := []string{"edgepipe"}
	for n := range standin.Tools {
		names = append(names, n)
	}
	for _, n := range names {
		if err := os.Symlink(self, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// project writes a recipe with two GGUF targets over a model big enough
// that the steps take a little while, so kills land mid-step.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "model"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "model", "config.json"), []byte(`{"hidden_size": 576}`), 0o644))
	weights := make([]byte, 24<<20)
	rand.Read(weights)
	must(os.WriteFile(filepath.Join(dir, "model", "model.safetensors"), weights, 0o644))
	must(os.WriteFile(filepath.Join(dir, "eval.txt"), bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog\n"), 40), 0o644))
	must(os.WriteFile(filepath.Join(dir, "recipe.yaml"), []byte(`edgepipe: 1
name: crash
model: {source: ./model}
data: {eval: eval.txt}
quality: {perplexity: {context: 16}}
targets:
  a: {device: x86-laptop, format: gguf-q4_k_m}
  b: {device: x86-laptop, format: gguf-q8_0}
  c: {device: apple-m4, format: gguf-q6_k}
`), 0o644))
	return dir
}

func edgepipe(bin, dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, "edgepipe"), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"EDGEPIPE_TOOL_PATH="+bin,
		"EDGEPIPE_CACHE="+filepath.Join(dir, ".cache"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// TestKillAndRerun kills a run with SIGKILL at random moments, many
// times, and checks that a rerun always finishes with artifacts that
// verify: nothing half-written is ever trusted.
func TestKillAndRerun(t *testing.T) {
	bin, dir := binDir(t), project(t)
	start := time.Now()
	if out, err := edgepipe(bin, dir, "run", "--force", "recipe.yaml").CombinedOutput(); err != nil {
		t.Fatalf("clean run: %v\n%s", err, out)
	}
	full := time.Since(start)
	rounds := 25
	if testing.Short() {
		rounds = 6
	}
	for i := 0; i < rounds; i++ {
		cmd := edgepipe(bin, dir, "run", "--force", "-j", "2", "recipe.yaml")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(full)+1))
		time.Sleep(time.Duration(n.Int64()))
		// Kill the whole group: edgepipe and the tool it is running.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()

		out, err := edgepipe(bin, dir, "run", "recipe.yaml").CombinedOutput()
		if err != nil {
			t.Fatalf("round %d: rerun after kill failed: %v\n%s", i, err, out)
		}
		for _, target := range []string{"a", "b", "c"} {
			v, err := edgepipe(bin, dir, "verify", filepath.Join("artifacts", "crash", target)).CombinedOutput()
			if err != nil {
				t.Fatalf("round %d: verify %s: %v\n%s", i, target, err, v)
			}
		}
		// Every cache entry left behind must hold what it claims.
		if out, err := edgepipe(bin, dir, "run", "--verify", "recipe.yaml").CombinedOutput(); err != nil || strings.Contains(string(out), "done ") {
			t.Fatalf("round %d: a --verify rerun found a cache entry that lies or reran a step: %v\n%s", i, err, out)
		}
	}
}

// TestConcurrentRuns runs two edgepipe processes on one cache at once:
// both succeed and no step runs twice.
func TestConcurrentRuns(t *testing.T) {
	bin, dir := binDir(t), project(t)
	a := edgepipe(bin, dir, "run", "--out", "out-a", "recipe.yaml")
	b := edgepipe(bin, dir, "run", "--out", "out-b", "recipe.yaml")
	var outA, outB bytes.Buffer
	a.Stderr, b.Stderr = &outA, &outB
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	errA, errB := a.Wait(), b.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("runs failed: %v / %v\n%s\n%s", errA, errB, outA.String(), outB.String())
	}
	ran := map[string]int{}
	for _, out := range []string{outA.String(), outB.String()} {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[1] == "done" {
				ran[f[2]]++
			}
		}
	}
	for step, n := range ran {
		if n > 1 {
			t.Errorf("step %s ran %d times across the two runs", step, n)
		}
	}
	if len(ran) == 0 {
		t.Fatalf("no step ran:\n%s\n%s", outA.String(), outB.String())
	}
	for _, d := range []string{"out-a/a", "out-b/a", "out-a/c", "out-b/c"} {
		if v, err := edgepipe(bin, dir, "verify", d).CombinedOutput(); err != nil {
			t.Fatalf("verify %s: %v\n%s", d, err, v)
		}
	}
}
