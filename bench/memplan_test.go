package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/bench/memplan"
)

// The whole benchmark on the stand-in tools: the first run makes the
// records, the second finds every step cached and must report the same
// figures from the same records (no --force: nothing reruns).
func TestMemoryPlanOnStandins(t *testing.T) {
	e := testEnv(t)
	var log strings.Builder
	e.log = &log
	dir := t.TempDir()
	if err := writeTinyProject(dir, "memtiny", ""); err != nil {
		t.Fatal(err)
	}
	e.memPlanRecipes, e.memPlanFit = filepath.Join(dir, "recipe.yaml"), true
	c := memplan.Config{Cache: filepath.Join(dir, "cache"), Env: []string{"EDGEPIPE_TOOL_PATH=" + e.standins}}
	first, err := memoryPlan(context.Background(), e, c)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	again, err := memoryPlan(context.Background(), e, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || len(again) != 1 {
		t.Fatalf("%d and %d lines, want one per recipe", len(first), len(again))
	}
	first[0].name, again[0].name = "memory-plan", "memory-plan"
	t.Logf("%s\n%s", log.String(), first[0].line())
	if first[0].line() != again[0].line() {
		t.Errorf("the cached rerun reports other figures:\n%s\n%s", first[0].line(), again[0].line())
	}
	k := keys(first[0])
	if k["model"] != "model" || k["goal"] != "within 25%" || k["steps"] == "0" || k["kinds"] == "0" || k["worst_kind"] == "none" {
		t.Errorf("line: %s", first[0].line())
	}
	for _, want := range []string{"pred_MiB", "peak_MiB", "gguf-convert", "memory-plan fit on model", "ModelFactor"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the explanation lacks %q:\n%s", want, log.String())
		}
	}
}
