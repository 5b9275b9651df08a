package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

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
