package gguf

import (
	"os"
	"path/filepath"
	"testing"
)

// A real llama-bench log (-o jsonl; a prompt test, then a decode test at
// depth 32, 3 repetitions each, on this 2-core machine under load).
func TestReadLlamaBenchTestsFromARealLog(t *testing.T) {
	tests, err := readLlamaBenchTests(filepath.Join("testdata", "llama-bench.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) != 2 {
		t.Fatalf("got %d tests, want 2", len(tests))
	}
	pp, tg := tests[0], tests[1]
	if pp.NPrompt != 32 || pp.NGen != 0 || pp.NDepth != 0 || len(pp.SamplesNS) != 3 || pp.SamplesNS[0] != 5915958870 {
		t.Errorf("prompt test %+v", pp)
	}
	if tg.NPrompt != 0 || tg.NGen != 1 || tg.NDepth != 32 || len(tg.SamplesNS) != 3 || tg.NThreads != 2 {
		t.Errorf("decode test %+v", tg)
	}
}

func TestReadLlamaBenchTestsRefusesABrokenLine(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(log, []byte("load_backend: x\n{\"n_prompt\": 1, \"samples_ns\": [1, \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readLlamaBenchTests(log); err == nil {
		t.Error("a truncated result line: want an error")
	}
}
