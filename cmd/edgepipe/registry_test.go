package main

import (
	"os"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/edgepipe/edgepipe/internal/testregistry"
)

// registryKey finds the script's registryHolder in its Values.
type registryKey struct{}

// registryHolder is the registry a script started, if any.
type registryHolder struct{ r *testregistry.Registry }

// registryCmd runs a real OCI registry (the CNCF distribution registry,
// in this test process, on a loopback port) for the script:
// `registry start` sets $REGISTRY to its HOST:PORT; `registry stop` stops
// it, so a script can see what a push to an unreachable registry does.
func registryCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: registry start|stop")
	}
	switch args[0] {
	case "start":
		r, err := testregistry.Start(testregistry.Options{})
		ts.Check(err)
		ts.Value(registryKey{}).(*registryHolder).r = r
		ts.Defer(r.Close)
		ts.Setenv("REGISTRY", r.Host)
	case "stop":
		r := ts.Value(registryKey{}).(*registryHolder).r
		if r == nil {
			ts.Fatalf("registry stop: no registry started")
		}
		r.Close()
	default:
		ts.Fatalf("usage: registry start|stop")
	}
}

// expandCmd replaces $VAR and ${VAR} in files with the script's
// environment: expand FILE...
func expandCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: expand FILE...")
	}
	for _, f := range args {
		b, err := os.ReadFile(ts.MkAbs(f))
		ts.Check(err)
		ts.Check(os.WriteFile(ts.MkAbs(f), []byte(os.Expand(string(b), ts.Getenv)), 0o644))
	}
}
