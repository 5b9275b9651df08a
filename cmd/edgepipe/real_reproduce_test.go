package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// demoQ8Recipe is recipes/demo.yaml with only its Q8_0 target: the same
// steps and cache keys, a third less to rebuild.
const demoQ8Recipe = `edgepipe: 1
name: demo
model:
  source: builtin:smollm2-135m
data:
  calibration: builtin:calibration
  eval: builtin:eval
quality:
  perplexity:
    context: 512
    max_chunks: 16
    warn_delta: 0.5
    max_delta: 2.0
targets:
  laptop-q8:
    device: x86-laptop
    format: gguf-q8_0
    context: 8192
`

// TestRealReproduceQ8 publishes the demo's Q8_0 target with the real
// llama.cpp tools, checks its lock, then rebuilds it from scratch with
// `edgepipe reproduce` and requires every file bit-identical and the
// rebuilt gate's perplexity equal: measured so on linux/amd64
// (docs/results/reproducibility.md), where the llama.cpp build is the portable one.
func TestRealReproduceQ8(t *testing.T) {
	t.Parallel() // two real tests at a time share the cores (docs/testing.md)
	run, work := realEdgepipe(t, "needs `edgepipe toolchain install llama llamacpp`; rebuilds the built-in model and the Q8_0 chain, about 10 minutes on 2 cores")
	if err := os.WriteFile(filepath.Join(work, "demo-q8.yaml"), []byte(demoQ8Recipe), 0o644); err != nil {
		t.Fatal(err)
	}
	run("run", "--out", "out", "demo-q8.yaml")
	if _, err := os.Stat(filepath.Join(work, "demo-q8.yaml.lock")); err != nil {
		t.Fatalf("the first run wrote no lock: %v", err)
	}
	if out := run("run", "--locked", "--out", "out", "demo-q8.yaml"); !bytes.Contains(out, []byte("demo-q8.yaml.lock matches")) {
		t.Fatalf("run --locked did not check the lock:\n%s", out)
	}

	out := run("reproduce", "--json", "out/laptop-q8")
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var fin struct {
		Event     string `json:"event"`
		ExitCode  int    `json:"exit_code"`
		Artifacts []struct {
			Identical bool `json:"identical"`
			Files     []struct {
				Path, Status string
			} `json:"files"`
			SourceDiffers []string `json:"source_differs"`
			Perplexity    *struct {
				Published, Rebuilt, Delta float64
			} `json:"perplexity"`
			Steps []struct {
				ID, Status string
				Argv       string `json:"argv_difference"`
			} `json:"steps"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &fin); err != nil || fin.Event != "reproduce-finished" || len(fin.Artifacts) != 1 {
		t.Fatalf("last line is not reproduce-finished (%v):\n%s", err, out)
	}
	a := fin.Artifacts[0]
	model := false
	for _, f := range a.Files {
		if f.Path == "smollm2-135m-q8_0.gguf" {
			model = f.Status == "identical"
		}
		if !strings.HasPrefix(f.Path, "logs/") && f.Status != "identical" {
			t.Errorf("%s: %s", f.Path, f.Status)
		}
	}
	if !model || !a.Identical || fin.ExitCode != 0 || len(a.SourceDiffers) > 0 {
		t.Fatalf("the rebuilt Q8_0 is not bit-identical:\n%s", out)
	}
	if p := a.Perplexity; p == nil || p.Delta != 0 || !(p.Rebuilt > 1) {
		t.Errorf("rebuilt perplexity %+v, want the published one exactly", p)
	}
	for _, s := range a.Steps {
		if s.Argv != "" {
			t.Errorf("step %s ran another command line: %s", s.ID, s.Argv)
		}
	}
	t.Logf("reproduce: %s", lines[len(lines)-1])
}
