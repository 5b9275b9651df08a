package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/edgepipe/edgepipe/internal/cli"
	"github.com/edgepipe/edgepipe/internal/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/standins" // every family's stand-ins
)

// TestMain makes the test binary act as edgepipe and as each tool
// stand-in, so scripts run the real CLI against stand-ins that read their
// inputs.
func TestMain(m *testing.M) {
	cmds := map[string]func(){
		"edgepipe": func() { os.Exit(cli.Run(os.Args[1:])) },
		// edgepipe-echo writes its arguments to smoke.out, for user steps.
		"edgepipe-echo": func() {
			if err := os.WriteFile("smoke.out", []byte(strings.Join(os.Args[1:], " ")+"\n"), 0o644); err != nil {
				os.Exit(1)
			}
			os.Exit(0)
		},
		// edgepipe-fail is a user step that fails, saying so, then
		// printing its arguments (a line each) as a tool prints its words.
		"edgepipe-fail": func() {
			os.Stderr.WriteString("edgepipe-fail: failing on purpose\n")
			for _, a := range os.Args[1:] {
				os.Stderr.WriteString(a + "\n")
			}
			os.Exit(1)
		},
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
			// A run that would install a toolchain fails at once here
			// instead of downloading from PyPI: the fast tier has no network.
			env.Setenv("EDGEPIPE_PYPI_INDEX", "http://127.0.0.1:9/simple")
			// A step that can use two threads gets this many on this machine.
			env.Setenv("THREADS_UP_TO_2", strconv.Itoa(min(2, runtime.NumCPU())))
			env.Values[registryKey{}] = &registryHolder{}
			env.Values[seaweedKey{}] = &seaweedHolder{}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			if cond == "seaweed" {
				return seaweedCondition()
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode":        exitCode,
			"genkey":          genKey,
			"sigstore-verify": sigstoreVerify,
			"registry":        registryCmd,
			"expand":          expandCmd,
			"corrupt-cache":   corruptCache,
			"https-serve":     httpsServe,
			"seaweed":         seaweedCmd,
			"mktar":           mktarCmd,
			"mkfifo":          mkfifoCmd,
			"isfifo":          isfifoCmd,
			"hang-serve":      hangServe,
			"mkgguf":          mkggufCmd,
			"mknpz":           mknpzCmd,
		},
	})
}

// exitCode runs a command and checks its exact exit status:
// exitcode CODE COMMAND [ARGS...]. The documented exit codes are a
// contract with CI scripts, so the tests pin them.
func exitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode CODE COMMAND [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	path, err := exec.LookPath(args[1])
	if err != nil {
		// LookPath uses this process's PATH; the script's comes first.
		for _, dir := range filepath.SplitList(ts.Getenv("PATH")) {
			if p := filepath.Join(dir, args[1]); fileExists(p) {
				path, err = p, nil
				break
			}
		}
		ts.Check(err)
	}
	cmd := exec.Command(path, args[2:]...)
	cmd.Dir = ts.Getenv("WORK")
	for _, k := range []string{"PATH", "HOME", "WORK", "EDGEPIPE_CACHE", "EDGEPIPE_TOOL_PATH", "TMPDIR",
		"EDGEPIPE_STANDIN_CHROMIUM_FLIP", "EDGEPIPE_STANDIN_CHROMIUM_HANG", "EDGEPIPE_HOST_LABEL",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_EC2_METADATA_DISABLED"} {
		cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	got := 0
	if ee, ok := err.(*exec.ExitError); ok {
		got = ee.ExitCode()
	} else {
		ts.Check(err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d; output:\n%s", strings.Join(args[1:], " "), got, want, out.String())
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
