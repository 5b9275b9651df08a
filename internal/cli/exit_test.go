package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

// Every exit code the help documents has the words the run's report
// and job summary give it.
func TestExitMeaningCoversEveryCode(t *testing.T) {
	codes := regexp.MustCompile(`(?m)^  (\d+)\s+\S`).FindAllStringSubmatch(exitCodesHelp, -1)
	if len(codes) < 9 {
		t.Fatalf("exit codes help lists %d codes:\n%s", len(codes), exitCodesHelp)
	}
	for _, m := range codes {
		code, _ := strconv.Atoi(m[1])
		if exitMeaning[code] == "" {
			t.Errorf("exit code %d has no meaning for the run's report", code)
		}
	}
}

// runMain runs edgepipe in this process with only env for an environment.
func runMain(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, &Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	return code, out.String(), errb.String()
}

// exitCode prints each kind of error once, its control characters
// neutralised, and gives it its documented code.
func TestExitCode(t *testing.T) {
	gate := &publish.GateError{Target: "q2", Gate: &publish.GateResult{Target: "q2"}}
	diags := recipe.Diagnostics{{Pos: recipe.Pos{File: "r.yaml", Line: 3, Col: 5}, Msg: "unknown key \"tragets\"", Hint: "did you mean targets?"},
		{Pos: recipe.Pos{File: "r.yaml", Line: 9, Col: 1}, Msg: "bad device"}}
	for _, tc := range []struct {
		name   string
		err    error
		code   int
		stderr []string
	}{
		{"ok", nil, ExitOK, nil},
		{"diagnostics", fmt.Errorf("load: %w", diags), ExitUsage, []string{"r.yaml:3:5", "tragets", "edgepipe: the recipe has 2 error(s); nothing was run"}},
		{"exit error", &ExitError{Code: ExitNotReproduced, Err: errors.New("1 of 2 folder(s) differ\x1b[2J")}, ExitNotReproduced, []string{"edgepipe: 1 of 2 folder(s) differ"}},
		{"silent exit error", &ExitError{Code: ExitGateFailed, Err: errors.New("")}, ExitGateFailed, nil},
		{"wrapped exit error", fmt.Errorf("step: %w", &ExitError{Code: ExitLockMismatch, Err: errors.New("lock differs")}), ExitLockMismatch, []string{"edgepipe: lock differs"}},
		{"interrupted", fmt.Errorf("step x: %w", context.Canceled), ExitInterrupted, []string{"edgepipe: interrupted; finished steps are cached, rerun to resume"}},
		{"gate", fmt.Errorf("publish: %w", gate), ExitGateFailed, []string{"edgepipe: publish: "}},
		{"not regular", fmt.Errorf("write: %w", &atomicfile.NotRegularError{Path: "/dev/null", What: "a character device"}), ExitUsage, []string{"/dev/null"}},
		{"step", errors.New("convert exited with code 1"), ExitStepFailed, []string{"edgepipe: convert exited with code 1"}},
	} {
		var stderr bytes.Buffer
		code := exitCode(&Env{Stderr: &stderr}, tc.err)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d", tc.name, code, tc.code)
		}
		if len(tc.stderr) == 0 && stderr.Len() > 0 {
			t.Errorf("%s: printed %q", tc.name, stderr.String())
		}
		for _, w := range tc.stderr {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: stderr %q lacks %q", tc.name, stderr.String(), w)
			}
		}
		if strings.ContainsRune(stderr.String(), 0x1b) {
			t.Errorf("%s: an escape reached the terminal: %q", tc.name, stderr.String())
		}
	}
}

func TestRunExitCode(t *testing.T) {
	push := &publish.PushError{Target: "q8", Dir: "d", Dest: "oci://h/r:t", Err: errors.New("refused")}
	gate := &publish.GateError{Target: "q2", Gate: &publish.GateResult{Target: "q2"}}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{&ExitError{Code: ExitNeedMissing, Err: errors.New("x")}, ExitNeedMissing},
		{fmt.Errorf("run: %w", context.Canceled), ExitInterrupted},
		{gate, ExitGateFailed},
		{push, ExitPushFailed},
		{errors.New("boom"), ExitStepFailed},
	} {
		if got := runExitCode(tc.err); got != tc.want {
			t.Errorf("runExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestRunErrorCases(t *testing.T) {
	if err := runError(&engine.RunResult{}, nil); err != nil {
		t.Errorf("a run without error: %v", err)
	}
	canceled := fmt.Errorf("run: %w", context.Canceled)
	gate := &publish.GateError{Target: "q2", Gate: &publish.GateResult{Target: "q2"}}
	if err := runError(&engine.RunResult{Failed: []error{gate}}, canceled); err != canceled {
		t.Errorf("an interrupted run: %v", err)
	}
	need := &engine.StepError{Step: "convert", Err: &engine.NeedMissingError{Step: "source", Key: "k"}}
	if err := runError(&engine.RunResult{Failed: []error{need}}, need); runExitCode(err) != ExitNeedMissing {
		t.Errorf("a missing need: %v (exit %d)", err, runExitCode(err))
	}
	a := &engine.StepError{Step: "a", Err: errors.New("first")}
	b := &engine.StepError{Step: "b", Err: errors.New("second")}
	err := runError(&engine.RunResult{Failed: []error{gate, a, b}}, a)
	if runExitCode(err) != ExitStepFailed || !strings.Contains(err.Error(), "3 failures; the first: ") || !strings.Contains(err.Error(), "first") || !errors.Is(err, a) {
		t.Errorf("several failures: %v", err)
	}
	// A run error no failed step explains is passed on as it is.
	other := errors.New("the cache is full")
	if err := runError(&engine.RunResult{}, other); err != other {
		t.Errorf("got %v", err)
	}
}

func writeRecipe(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const twoTargets = `edgepipe: 1
name: two
model: {source: builtin:smollm2-135m}
targets:
  laptop-q4: {device: x86-laptop, format: gguf-q4_k_m}
  laptop-q8: {device: x86-laptop, format: gguf-q8_0}
`

// Main tells cobra's errors (unknown command or flag), the commands'
// own usage errors and a bad recipe apart from a failed run.
func TestMainExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := writeRecipe(t, dir, "two.yaml", twoTargets)
	bad := writeRecipe(t, dir, "bad.yaml", "edgepipe: 1\nname: bad\nmodel: {source: builtin:smollm2-135m}\ntragets: {}\n")
	cache := t.TempDir()
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"valdate", good}, ExitUsage, "", `unknown command "valdate"`},
		{[]string{"validate", "--nosuch", good}, ExitUsage, "", "unknown flag: --nosuch (see `edgepipe validate --help`)"},
		{[]string{"run", "--jbos", "2", good}, ExitUsage, "", "did you mean --jobs?"},
		{[]string{"validate"}, ExitUsage, "", "validate takes one recipe file"},
		{[]string{"validate", filepath.Join(dir, "missing.yaml")}, ExitUsage, "", "does not exist: check the path"},
		{[]string{"validate", good}, ExitOK, good + ": ok (2 targets, ", ""},
		{[]string{"validate", bad}, ExitUsage, "", "the recipe has "},
		{[]string{"--version"}, ExitOK, "edgepipe " + VersionString(), ""},
		{[]string{"version"}, ExitOK, "edgepipe " + VersionString(), ""},
		{[]string{"completion", "tcsh"}, ExitUsage, "", "completion takes one shell"},
		{[]string{"graph", "--format", "svg", good}, ExitUsage, "", `--format must be dot or mermaid, not "svg"`},
		{[]string{"graph", "--format", "mermaid", "-t", "laptop-q8", good}, ExitOK, "flowchart", ""},
		{[]string{"graph", "-t", "laptop-8", good}, ExitUsage, "", "--target laptop-8 matches no target of the recipe; did you mean laptop-q8?"},
		{[]string{"cache", "nope", "--cache-dir", cache}, ExitUsage, "", "usage: edgepipe cache ls | edgepipe cache gc"},
		{[]string{"step", "go", "p.json", "x"}, ExitUsage, "", "usage: edgepipe step run"},
		{[]string{"export", "argo", good}, ExitUsage, "", "export argo needs --remote-cache URL"},
		{[]string{"pull", "https://h/r:t", "dir"}, ExitUsage, "", "pull takes an oci:// reference and a folder"},
		{[]string{"verify"}, ExitUsage, "", "verify takes the published folder(s)"},
		{[]string{"reproduce"}, ExitUsage, "", "reproduce takes published folders"},
		{[]string{"reproduce", dir}, ExitUsage, "", "is not a published folder"},
		{[]string{"lock"}, ExitUsage, "", "lock takes one recipe file"},
		{[]string{"doctor", "a", "b"}, ExitUsage, "", "doctor takes at most one recipe"},
		{[]string{"toolchain", "frobnicate"}, ExitUsage, "", "usage: edgepipe toolchain install"},
	} {
		code, stdout, stderr := runMain(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("edgepipe %s: exit %d, stdout %q, stderr %q; want %d, %q, %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}
