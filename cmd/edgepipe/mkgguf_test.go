package main

import (
	"os"
	"path/filepath"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/edgepipe/edgepipe/internal/gguf/gguftest"
)

// mkggufCmd writes a GGUF a script needs, its tensor data a sparse hole:
// mkgguf FILE [KEY=VALUE...], the keys gguftest.Parse reads (layers=2,
// file_type=Q4_K_M, weights=Q4_K, split=1/3, preset=llama3-8b,
// kv=general.name:str:B, ...). With no keys it is gguftest.Tiny.
func mkggufCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: mkgguf FILE [KEY=VALUE...]")
	}
	m, err := gguftest.Parse(args[1:])
	ts.Check(err)
	ts.Check(os.MkdirAll(filepath.Dir(ts.MkAbs(args[0])), 0o755))
	ts.Check(m.File().Write(ts.MkAbs(args[0])))
}
