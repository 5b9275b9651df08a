package gguf_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/gguf"
	"github.com/edgepipe/edgepipe/internal/gguf/gguftest"
)

func TestSplitName(t *testing.T) {
	for name, want := range map[string]struct {
		prefix    string
		no, count int
		ok        bool
	}{
		"model-00001-of-00003.gguf":   {"model", 1, 3, true},
		"a-b-00002-of-00002.gguf":     {"a-b", 2, 2, true},
		"model-00001-of-00001.gguf":   {"model", 1, 1, false}, // whole
		"model.gguf":                  {},
		"model-0001-of-0003.gguf":     {},
		"model-00001-of-00003.gguf.1": {},
	} {
		prefix, no, count, ok := gguf.SplitName(name)
		if prefix != want.prefix || no != want.no || count != want.count || ok != want.ok {
			t.Errorf("%s: %q %d %d %v, want %+v", name, prefix, no, count, ok, want)
		}
	}
	if got := gguf.SplitPartName("m", 2, 12); got != "m-00002-of-00012.gguf" {
		t.Errorf("SplitPartName = %q", got)
	}
}

// TestCheckSplit: the missing parts are named; parts from another set are
// found by their metadata; a complete set is still an error, with the
// command that merges it.
func TestCheckSplit(t *testing.T) {
	dir := t.TempDir()
	part := func(no, count int, name string) {
		m := gguftest.Tiny()
		m.Split = [2]int{no - 1, count}
		if err := m.File().Write(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	part(2, 3, "m-00002-of-00003.gguf")
	err := gguf.CheckSplit(dir, "m", 3)
	if got := err.Error(); len(err.Missing) != 2 || !strings.Contains(got, "2 of them are not here (m-00001-of-00003.gguf, m-00003-of-00003.gguf)") ||
		!strings.Contains(got, "llama-gguf-split --merge m-00001-of-00003.gguf m.gguf") {
		t.Errorf("missing parts: %v", err)
	}
	part(1, 3, "m-00001-of-00003.gguf")
	part(3, 4, "m-00003-of-00003.gguf")
	if err := gguf.CheckSplit(dir, "m", 3); len(err.Inconsistent) != 1 || !strings.Contains(err.Error(), "m-00003-of-00003.gguf says it is part 3 of 4") {
		t.Errorf("another set's part: %v", err)
	}
	part(3, 3, "m-00003-of-00003.gguf")
	if err := gguf.CheckSplit(dir, "m", 3); len(err.Missing)+len(err.Inconsistent) > 0 || !strings.Contains(err.Error(), "3 parts (all here)") {
		t.Errorf("a complete set: %v", err)
	}
	whole := gguftest.Tiny()
	if err := whole.File().Write(filepath.Join(dir, "m-00002-of-00003.gguf")); err != nil {
		t.Fatal(err)
	}
	if err := gguf.CheckSplit(dir, "m", 3); !strings.Contains(err.Error(), "m-00002-of-00003.gguf has no split.count") {
		t.Errorf("a whole model named as a part: %v", err)
	}
	if err := gguf.CheckSplit(dir, "m", 99999); !strings.Contains(err.Error(), "more than a split GGUF has") {
		t.Errorf("99999 parts: %v", err)
	}
}
