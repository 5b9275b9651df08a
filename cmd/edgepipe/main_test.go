package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/edgepipe/edgepipe/internal/cli"
	"github.com/edgepipe/edgepipe/internal/standin"
)

// TestMain makes the test binary act as edgepipe and as each tool
// stand-in, so scripts run the real CLI against stand-ins that read their
// inputs.
func TestMain(m *testing.M) {
	cmds := map[string]func(){
		"edgepipe": func() { os.Exit(cli.Run(os.Args[1:])) },
	}
	for name := range standin.Tools {
		name := name
		cmds[name] = func() { os.Exit(standin.Main(name, os.Args[1:])) }
	}
	testscript.Main(m, cmds)
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			// testscript puts the commands above first on PATH; the tool
			// path points edgepipe at the stand-ins there.
			bin := strings.SplitN(env.Getenv("PATH"), string(os.PathListSeparator), 2)[0]
			env.Setenv("EDGEPIPE_TOOL_PATH", bin)
			env.Setenv("EDGEPIPE_CACHE", filepath.Join(env.WorkDir, ".cache"))
			env.Setenv("HOME", env.WorkDir)
			return nil
		},
	})
}
