// Package cli is edgepipe's command line: it parses flags, wires the
// packages together and maps errors to the documented exit codes.
// cmd/edgepipe only calls Main.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	_ "github.com/edgepipe/edgepipe/pipelines" // the built-in format families

	"github.com/edgepipe/edgepipe/internal/publish"

	"github.com/edgepipe/edgepipe/internal/engine"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/provenance"
)

// Version is edgepipe's version, set at build time with -ldflags.
var Version = "0.1.0-dev"

// Exit codes, documented in the README and --help.
const (
	ExitOK         = 0
	ExitStepFailed = 1
	ExitUsage      = 2
	ExitGateFailed = 3
	// ExitLockMismatch: run --locked found the recipe's lock out of date
	// (or missing); nothing ran. CI can tell it from a broken recipe (2)
	// and answer it with --update-lock.
	ExitLockMismatch = 4
	// ExitNotReproduced: reproduce rebuilt the artifact and some file is
	// not bit-identical to the published one.
	ExitNotReproduced = 5
	// ExitPushFailed: every target that passed its gate is published
	// locally, but a push to a remote (publish: in the recipe) failed.
	ExitPushFailed  = 6
	ExitInterrupted = 130
)

// ExitError carries the exit code an error maps to.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

func usageErr(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Env is what a command sees of the outside world.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// IsTerminal reports whether Stderr is a terminal (progress bars).
	IsTerminal bool
	// onFlagSet sees every command's flag set; completion uses it to list
	// each command's flags.
	onFlagSet func(*flag.FlagSet)
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

var commands []command

func init() {
	commands = []command{
		{"run", "run a recipe: convert, validate, publish", cmdRun},
		{"plan", "print the step graph with each step's cache status", cmdPlan},
		{"validate", "check a recipe without running anything", cmdValidate},
		{"graph", "print the step graph as dot or mermaid", cmdGraph},
		{"step", "run one step of a saved plan: step run PLAN.json STEP-ID", cmdStep},
		{"lock", "resolve a recipe's inputs and write RECIPE.lock", cmdLock},
		{"verify", "re-hash a published folder against its manifest and provenance", cmdVerify},
		{"reproduce", "rebuild published folders in a scratch cache and compare them file by file", cmdReproduce},
		{"pull", "download a pushed artifact and verify it: pull oci://HOST/REPO:TAG DIR", cmdPull},
		{"cache", "cache ls | cache gc", cmdCache},
		{"toolchain", "toolchain install [NAME...] | toolchain list", cmdToolchain},
		{"doctor", "say which tools are installed, their versions, and how to install the rest", cmdDoctor},
		{"devices", "list the device catalog", cmdDevices},
		{"ceiling", "decode ceiling (bandwidth / model size) per device, against observed speeds", cmdCeiling},
		{"pick", "choose device, format and pipeline for a platform, model and budget", cmdPick},
		{"init", "write a recipe from pick's choice: init --platform P --model M -o FILE", cmdInit},
		{"completion", "print a shell completion script: completion bash|zsh|fish", cmdCompletion},
		{"version", "print edgepipe's version", cmdVersion},
	}
}

const exitCodesHelp = `Exit codes:
  0    ok
  1    a step failed
  2    invalid recipe or usage
  3    a quality gate failed (nothing published for that target)
  4    run --locked: the recipe's lock is missing or out of date (nothing ran)
  5    reproduce: a rebuilt file is not bit-identical to the published one
  6    a push to a remote failed (the local artifacts are published)
  130  interrupted`

func usage(w io.Writer) {
	fmt.Fprintf(w, "edgepipe %s: convert models for edge devices, gate them on quality, publish verified artifacts\n\nUsage: edgepipe COMMAND [flags] [args]\n\nCommands:\n", Version)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun `edgepipe COMMAND -h` for a command's flags.\n\n%s\n", exitCodesHelp)
}

// Main runs edgepipe with args (without the program name) and returns the
// exit code.
func Main(ctx context.Context, args []string, env *Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	if args[0] == "--version" {
		args[0] = "version"
	}
	for _, c := range commands {
		if c.name == args[0] {
			return exitCode(env, c.run(ctx, env, args[1:]))
		}
	}
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	sort.Strings(names)
	fmt.Fprintf(env.Stderr, "edgepipe: unknown command %q; commands: %s\n", args[0], strings.Join(names, ", "))
	return ExitUsage
}

func exitCode(env *Env, err error) int {
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	var diags recipe.Diagnostics
	var ee *ExitError
	switch {
	case errors.As(err, &diags):
		fmt.Fprintln(env.Stderr, diags.Error())
		fmt.Fprintf(env.Stderr, "edgepipe: the recipe has %d error(s); nothing was run\n", len(diags))
		return ExitUsage
	case errors.As(err, &ee):
		if ee.Err != nil && ee.Err.Error() != "" {
			fmt.Fprintf(env.Stderr, "edgepipe: %v\n", ee.Err)
		}
		return ee.Code
	case engine.IsInterrupted(err):
		fmt.Fprintln(env.Stderr, "edgepipe: interrupted; finished steps are cached, rerun to resume")
		return ExitInterrupted
	case publish.IsGateFailure(err):
		fmt.Fprintf(env.Stderr, "edgepipe: %v\n", err)
		return ExitGateFailed
	}
	fmt.Fprintf(env.Stderr, "edgepipe: %v\n", err)
	return ExitStepFailed
}

// flagSet makes a FlagSet that prints its usage to the env.
func flagSet(env *Env, name, usageLine string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "Usage: edgepipe %s\n\nFlags:\n", usageLine)
		fs.PrintDefaults()
	}
	if env.onFlagSet != nil {
		env.onFlagSet(fs)
	}
	return fs
}

// parseInterleaved parses flags that may come before or after positional
// arguments (`edgepipe run recipe.yaml -j 2`).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &ExitError{Code: ExitUsage, Err: errors.New("")}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// common flags shared by the commands that load a recipe and a cache.
type common struct {
	cacheDir  string
	jobs      int
	keepGoing bool
	json      bool
	out       string
	verbose   bool
	toolPath  string
	maxMemGB  float64
	force     bool
	verify    bool
	signKey   string
	noPush    bool
}

func (c *common) register(fs *flag.FlagSet, env *Env, runFlags bool) {
	fs.StringVar(&c.cacheDir, "cache-dir", env.Getenv("EDGEPIPE_CACHE"), "cache folder (env EDGEPIPE_CACHE; default ~/.cache/edgepipe)")
	fs.StringVar(&c.toolPath, "tool-path", env.Getenv("EDGEPIPE_TOOL_PATH"), "folders searched first for tools by name, ':'-separated (env EDGEPIPE_TOOL_PATH)")
	fs.BoolVar(&c.json, "json", false, "machine-readable output (run: JSON-lines events)")
	fs.BoolVar(&c.verbose, "v", false, "verbose: copy tool output to the terminal")
	if !runFlags {
		return
	}
	fs.IntVar(&c.jobs, "j", 0, "steps run at once (default: the recipe's resources.jobs, else the number of cores)")
	fs.BoolVar(&c.keepGoing, "keep-going", false, "after a failure, finish independent branches")
	fs.StringVar(&c.out, "out", "", "publish folder (default artifacts/<recipe name>)")
	fs.Float64Var(&c.maxMemGB, "max-memory", 0, "memory budget in GiB for steps running at once (default: the recipe's, else the machine's)")
	fs.BoolVar(&c.force, "force", false, "rerun every step, ignoring cache hits")
	fs.BoolVar(&c.verify, "verify", false, "rehash every input and cached output instead of trusting file stats")
	fs.BoolVar(&c.noPush, "no-push", false, "publish locally only: skip the targets' publish: remotes")
	fs.StringVar(&c.signKey, "sign-key", "", "sign each target's provenance with this private key (`FILE`, PEM PKCS#8, ECDSA P-256 or ed25519; env "+provenance.SigningKeyEnv+": a path or the PEM itself)")
}
