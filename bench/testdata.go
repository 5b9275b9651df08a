package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// writeRandomFile writes size pseudo-random bytes: real data on disk, not a
// sparse file, so that whoever reads it pays for every byte. It syncs the
// file, so writeback of setup data does not run during the timed runs.
func writeRandomFile(ctx context.Context, path string, size int64, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	r := rand.NewChaCha8(s)
	buf := make([]byte, 4<<20)
	w := bufio.NewWriterSize(f, len(buf))
	for left := size; left > 0; left -= int64(len(buf)) {
		if err := ctx.Err(); err != nil {
			f.Close()
			return err
		}
		b := buf[:min(left, int64(len(buf)))]
		_, _ = r.Read(b) // never fails
		if _, err := w.Write(b); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// evalText is a short evaluation text for the stand-in perplexity tool.
const evalText = `It was the best of times, it was the worst of times, it was the age of wisdom,
it was the age of foolishness, it was the epoch of belief, it was the epoch of
incredulity, it was the season of Light, it was the season of Darkness, it was
the spring of hope, it was the winter of despair, we had everything before us,
we had nothing before us, we were all going direct to Heaven, we were all going
direct the other way.
`

// writeTinyProject writes a recipe folder that runs on the stand-in tools:
// model/ with a small checkpoint, eval.txt and recipe.yaml with one GGUF
// target, plus extraRecipe appended to the recipe (e.g. a steps: block).
func writeTinyProject(dir, name, extraRecipe string) error {
	files := map[string]string{
		"model/config.json":       `{"hidden_size": 576, "num_hidden_layers": 30}` + "\n",
		"model/tokenizer.json":    `{"version": "1.0"}` + "\n",
		"model/model.safetensors": strings.Repeat("stand-in weights for the benchmark\n", 64),
		"eval.txt":                evalText,
		"recipe.yaml": fmt.Sprintf(`edgepipe: 1
name: %s
model:
  source: ./model
data:
  eval: eval.txt
quality:
  perplexity:
    context: 32
targets:
  laptop-q8:
    device: x86-laptop
    format: gguf-q8_0
`, name) + extraRecipe,
	}
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// settle waits until files written just now are older than the digest
// memo's racy window (a digest of a file written within ~100 ms of hashing
// is not remembered, by design), so setup does not leak into a timed run.
func settle() { time.Sleep(300 * time.Millisecond) }

// goTask returns the go-task binary pinned in go.mod, building it if
// needed. `go tool -n task` prints the cached binary's path; running that
// binary directly keeps the go command's own start-up out of the timings.
func (e *env) goTask(ctx context.Context) (string, error) {
	if e.taskBin != "" {
		return e.taskBin, nil
	}
	cmd := exec.CommandContext(ctx, "go", "tool", "-n", "task")
	cmd.Dir = e.root
	out, err := cmd.Output()
	path := strings.TrimSpace(string(out))
	if err == nil && filepath.IsAbs(path) {
		if _, statErr := os.Stat(path); statErr == nil {
			e.taskBin = path
			return path, nil
		}
	}
	path = filepath.Join(e.scratch, "task")
	cmd = exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/go-task/task/v3/cmd/task")
	cmd.Dir = e.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build go-task (the peer; pinned as a tool in go.mod): %w\n%s", err, out)
	}
	e.taskBin = path
	return path, nil
}
