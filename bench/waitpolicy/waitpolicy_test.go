package waitpolicy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

func TestCommandSetsThreads(t *testing.T) {
	steps := []manifest.Step{
		{ID: "perplexity:baseline", Argv: [][]string{{"llama-perplexity", "-t", "1", "-m", "f16.gguf"}}},
		{ID: "perplexity:q8_0", Argv: [][]string{{"llama-perplexity", "-m", "q8.gguf", "-t", "1", "--kl-divergence"}}},
	}
	got, err := Command(steps, "perplexity:q8_0", 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"llama-perplexity", "-m", "q8.gguf", "-t", "2", "--kl-divergence"}; !slices.Equal(got, want) {
		t.Errorf("Command = %q, want %q", got, want)
	}
	if steps[1].Argv[0][4] != "1" {
		t.Error("Command changed the manifest's argv in place")
	}
	if _, err := Command(steps, "perplexity:q4_k_m", 2); err == nil {
		t.Error("Command found a step that is not there")
	}
	if _, err := Command([]manifest.Step{{ID: "x", Argv: [][]string{{"tool", "-t"}}}}, "x", 2); err == nil {
		t.Error("Command accepted a -t without its count")
	}
}

// Each side must really get its own policy, and the sides alternate.
func TestMeasureGivesEachSideItsPolicy(t *testing.T) {
	t.Setenv("OMP_WAIT_POLICY", "ACTIVE")
	log := filepath.Join(t.TempDir(), "policies")
	argv := []string{"sh", "-c", `echo "${OMP_WAIT_POLICY:-default}" >> "$0"`, log}
	times, err := Measure(context.Background(), argv, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(times.Default) != 2 || len(times.Passive) != 2 {
		t.Fatalf("got %d default and %d passive times, want 2 each", len(times.Default), len(times.Passive))
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(string(data)), []string{"PASSIVE", "default", "default", "PASSIVE"}; !slices.Equal(got, want) {
		t.Errorf("the runs saw %q, want %q", got, want)
	}
	if _, err := Measure(context.Background(), []string{"sh", "-c", "echo broken >&2; exit 3"}, 1); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Errorf("a failing command gave %v, want its error with its output", err)
	}
}
