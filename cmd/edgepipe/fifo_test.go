package main

import (
	"io/fs"
	"os"
	"syscall"

	"github.com/rogpeppe/go-internal/testscript"
)

// mkfifoCmd makes a named pipe: mkfifo PATH.
func mkfifoCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mkfifo PATH")
	}
	ts.Check(syscall.Mkfifo(ts.MkAbs(args[0]), 0o644))
}

// isfifoCmd checks that PATH is a named pipe, or a link to one:
// [!] isfifo PATH.
func isfifoCmd(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: isfifo PATH")
	}
	st, err := os.Stat(ts.MkAbs(args[0]))
	fifo := err == nil && st.Mode()&fs.ModeNamedPipe != 0
	if fifo == neg {
		ts.Fatalf("%s: named pipe %v, want %v (%v)", args[0], fifo, !neg, err)
	}
}
