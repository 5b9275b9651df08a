// Package cli is edgepipe's command line: it parses flags, wires the
// packages together and maps errors to the documented exit codes.
// cmd/edgepipe only calls Main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/buildinfo"
	"github.com/edgepipe/edgepipe/internal/progress"
	"github.com/edgepipe/edgepipe/internal/safetext"
	"io"
	"os"
	"strings"

	_ "github.com/edgepipe/edgepipe/pipelines" // the built-in format families
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgepipe/edgepipe/internal/complete"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/remotecache"
	"github.com/edgepipe/edgepipe/internal/suggest"

	"github.com/edgepipe/edgepipe/internal/engine"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/provenance"
)

// Version is edgepipe's version (see buildinfo).
var Version = buildinfo.Version

// VersionString is the version with the VCS revision.
func VersionString() string { return buildinfo.String() }

// Exit codes, documented in docs/cli.md (summed up in the README) and
// --help.
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
	ExitPushFailed = 6
	// ExitNeedMissing: step run found a step it needs in neither the
	// local nor the remote cache; nothing ran (run the need first).
	ExitNeedMissing = 7
	ExitInterrupted = 130
)

// ExitError carries the exit code an error maps to.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// toolOutput is where tools' live output goes (-v, toolchain installs):
// stderr, with their control characters dropped so a tool cannot drive the
// terminal.
func (env *Env) toolOutput() io.Writer { return safetext.NewWriter(env.Stderr) }

// progress is what the progress reporter needs of the environment.
func (env *Env) progress() progress.Env {
	return progress.Env{Stdout: env.Stdout, Stderr: env.Stderr, IsTerminal: env.IsTerminal, Getenv: env.Getenv, Width: env.Width}
}

func usageErr(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Env is what a command sees of the outside world.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// IsTerminal reports whether Stderr is a terminal (the live status
	// lines, colour); StdoutIsTerminal the same for Stdout (colour in the
	// summary table).
	IsTerminal       bool
	StdoutIsTerminal bool
	// Width is the terminal's width in columns (nil: 80).
	Width func() int
}

// runFunc runs a command with its flags parsed and its positional
// arguments.
type runFunc func(ctx context.Context, args []string) error

// command is one subcommand: its usage line (the name first), its help,
// its flags and what it does with them.
type command struct {
	use     string
	summary string
	// long is the help's body.
	long string
	// define adds the command's flags and returns what runs it.
	define func(env *Env, fs *pflag.FlagSet) runFunc
	// complete completes positional arguments (nil: files).
	complete cobra.CompletionFunc
}

func commands() []command {
	return []command{
		{use: "run [flags] RECIPE", summary: "run a recipe: convert, validate, publish", define: cmdRun, complete: complete.RecipeArg},
		{use: "plan [--json] [--bundle FILE] [--target NAME] RECIPE", summary: "print the step graph with each step's cache status", define: cmdPlan, complete: complete.RecipeArg},
		{use: "validate [--json] RECIPE", summary: "check a recipe without running anything", define: cmdValidate, complete: complete.RecipeArg},
		{use: "graph --format dot|mermaid [--target NAME] RECIPE", summary: "print the step graph as dot or mermaid", define: cmdGraph, complete: complete.RecipeArg},
		{use: "step run PLAN.json|BUNDLE STEP-ID", summary: "run one step of a saved plan or bundle (plan --bundle), on any machine", define: cmdStep, complete: complete.StepArgs},
		{use: "export argo [--image IMG] --remote-cache URL [--target NAME] RECIPE", summary: "print the plan as an Argo Workflow: one pod per step running `edgepipe step run`", define: cmdExport, complete: complete.RecipeArg},
		{use: "lock [flags] RECIPE", summary: "resolve a recipe's inputs and write RECIPE.lock", define: cmdLock, complete: complete.RecipeArg},
		{use: "verify [--key PUB.pem] [--json] DIR...", summary: "re-hash a published folder against its manifest and provenance", define: cmdVerify, complete: complete.DirArgs},
		{use: "reproduce [flags] DIR...", summary: "rebuild published folders in a scratch cache and compare them file by file", define: cmdReproduce, complete: complete.DirArgs},
		{use: "pull [--key PUB.pem] [--insecure] oci://HOST/REPOSITORY:TAG DIR", summary: "download a pushed artifact and verify it", define: cmdPull},
		{use: "cache ls | cache gc [--older-than DURATION] [--dry-run]", summary: "list the cache, or remove incomplete entries and what was not used for a while", define: cmdCache, complete: complete.Words("ls", "gc")},
		{use: "toolchain install [NAME...] [--for RECIPE] | list | prune | remove NAME...", summary: "install the pinned toolchains (all, by name, or what a recipe needs), list them with sizes and last use, remove them", define: cmdToolchain, complete: complete.ToolchainArgs},
		{use: "doctor [--json] [RECIPE]", summary: "say which tools are installed, their versions, and how to install the rest (with RECIPE: only what it needs)", define: cmdDoctor, complete: complete.RecipeArg},
		{use: "devices [--json]", summary: "list the device catalog", define: cmdDevices, complete: complete.NoArgs},
		{use: "ceiling --model-gb GB | RECIPE [-o DIR] [--json]", summary: "decode ceiling (bandwidth / model size) per device, against observed speeds", define: cmdCeiling, complete: complete.NoArgs},
		{use: "pick --platform PLATFORM (--model SOURCE [--max-memory GB] [--min-tok-s N] [--context N] | --task vision --params N) [--json]", summary: "choose device, format and pipeline for a platform, model and budget (--task vision: backbone, runtime and INT8 format for an image classifier)", define: cmdPick, complete: complete.NoArgs},
		{use: "init --platform PLATFORM[,PLATFORM...] --model SOURCE -o RECIPE.yaml [--name NAME] [--force]", summary: "write a recipe from pick's choice", define: cmdInit, complete: complete.NoArgs},
		{use: "schema", summary: "print the recipe's JSON Schema (for editors; its $id is where it is published)", define: cmdSchema, complete: complete.NoArgs},
		{use: "version [--json]", summary: "print edgepipe's version", define: cmdVersion, complete: complete.NoArgs},
	}
}

// examples show each command in use, in its help.
var examples = map[string]string{
	"run": `  edgepipe run recipes/demo.yaml
  edgepipe run -j 2 -t laptop-q8 --junit report.xml recipes/demo.yaml`,
	"plan": `  edgepipe plan recipes/demo.yaml
  edgepipe plan --json recipes/demo.yaml`,
	"validate": `  edgepipe validate recipes/demo.yaml`,
	"graph":    `  edgepipe graph --format dot recipes/demo.yaml | dot -Tsvg > plan.svg`,
	"step": `  edgepipe plan --bundle plan.tar.gz recipes/demo.yaml
  edgepipe step run plan.tar.gz source --remote-cache s3::https://127.0.0.1:8333/edgepipe/cache`,
	"export":    `  edgepipe export argo --remote-cache s3::https://127.0.0.1:8333/edgepipe/cache recipes/demo.yaml > workflow.yaml`,
	"lock":      `  edgepipe lock recipes/demo.yaml && edgepipe run --locked recipes/demo.yaml`,
	"verify":    `  edgepipe verify artifacts/demo/laptop-q8`,
	"reproduce": `  edgepipe reproduce artifacts/demo/laptop-q8`,
	"pull":      `  edgepipe pull oci://127.0.0.1:5000/models/smollm2:laptop-q8 ./pulled`,
	"cache": `  edgepipe cache ls
  edgepipe cache gc --older-than 720h --dry-run`,
	"toolchain": `  edgepipe toolchain install --for recipes/demo.yaml
  edgepipe toolchain list`,
	"doctor":  `  edgepipe doctor recipes/demo.yaml`,
	"devices": `  edgepipe devices --json`,
	"ceiling": `  edgepipe ceiling --model-gb 4.7`,
	"pick": `  edgepipe pick --platform ios --model builtin:smollm2-135m
  edgepipe pick --platform ios,android,browser --model ./my-model
  edgepipe pick --task vision --platform android --params 2.5M`,
	"init": `  edgepipe init --platform laptop --model builtin:smollm2-135m -o recipes/laptop.yaml
  edgepipe init --platform ios,android,browser --model ./my-model -o recipes/apps.yaml`,
	"schema":  `  edgepipe schema > recipe.schema.json`,
	"version": `  edgepipe version`,
}

const exitCodesHelp = `Exit codes:
  0    ok
  1    a step failed
  2    invalid recipe or usage
  3    a quality gate failed (nothing published for that target)
  4    run --locked: the recipe's lock is missing or out of date (nothing ran)
  5    reproduce: a rebuilt file is not bit-identical to the published one
  6    a push to a remote failed (the local artifacts are published)
  7    step run: a step it needs is in neither the local nor the remote cache
  130  interrupted`

// exitCodesPointer ends each command's help: the table is printed once,
// by its own help topic.
const exitCodesPointer = "Exit codes: `edgepipe help exit-codes`."

// printHelp prints a command's help with its usage line first, then what
// it does, examples, its subcommands and help topics, and its flags.
func printHelp(c *cobra.Command, _ []string) {
	var sections []string
	switch {
	case c.Runnable():
		sections = append(sections, "Usage: "+c.UseLine())
	case c.HasAvailableSubCommands():
		sections = append(sections, "Usage: "+c.CommandPath()+" COMMAND [flags]")
	}
	text := c.Long
	if text == "" {
		text = c.Short
	}
	if text = strings.TrimSpace(text); text != "" {
		sections = append(sections, text)
	}
	if c.HasExample() {
		sections = append(sections, "Examples:\n"+strings.TrimRight(c.Example, "\n"))
	}
	var cmds, topics []string
	for _, sub := range c.Commands() {
		switch {
		case sub.IsAvailableCommand() || sub.Name() == "help":
			cmds = append(cmds, fmt.Sprintf("  %-*s %s", sub.NamePadding(), sub.Name(), sub.Short))
		case sub.IsAdditionalHelpTopicCommand():
			topics = append(topics, fmt.Sprintf("  %s %s  %s", c.CommandPath(), "help "+sub.Name(), sub.Short))
		}
	}
	if len(cmds) > 0 {
		sections = append(sections, "Commands:\n"+strings.Join(cmds, "\n")+"\n\nRun `"+c.CommandPath()+" COMMAND --help` for a command's flags and examples.")
	}
	if len(topics) > 0 {
		sections = append(sections, "Help topics:\n"+strings.Join(topics, "\n"))
	}
	if c.HasAvailableLocalFlags() && (c.Runnable() || c.HasAvailableSubCommands()) {
		sections = append(sections, "Flags:\n"+strings.TrimRight(c.LocalFlags().FlagUsages(), "\n"))
	}
	if c.HasAvailableInheritedFlags() {
		sections = append(sections, "Global flags:\n"+strings.TrimRight(c.InheritedFlags().FlagUsages(), "\n"))
	}
	fmt.Fprintln(c.OutOrStdout(), strings.Join(sections, "\n\n"))
}

// newRoot builds the command tree: GNU flags with short forms, help on
// stdout for every command, did-you-mean for commands and flags, and the
// shell completion cobra generates from the same tree.
func newRoot(env *Env) *cobra.Command {
	return newRootRan(env, new(bool))
}

// newRootRan is newRoot that sets *ran when a command's own code runs, so
// Main can tell cobra's argument and flag errors (usage, exit 2) from the
// command's.
func newRootRan(env *Env, ran *bool) *cobra.Command {
	root := &cobra.Command{
		Use:   "edgepipe",
		Short: "convert models for edge devices, gate them on quality, publish verified artifacts",
		Long: "edgepipe " + Version + ": convert models for edge devices, gate them on quality, publish verified artifacts.\n\n" +
			"The everyday loop: pick -> init -> plan -> run -> verify. " + exitCodesPointer,
		Version:                    VersionString(),
		SilenceErrors:              true,
		SilenceUsage:               true,
		SuggestionsMinimumDistance: 2,
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetVersionTemplate("edgepipe {{.Version}}\n")
	root.Flags().BoolP("version", "V", false, "print edgepipe's version and exit")
	root.SetFlagErrorFunc(flagError)
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetHelpFunc(printHelp)
	root.AddCommand(completionCommand(env))
	// A help topic (no Run): `edgepipe help exit-codes` prints it.
	root.AddCommand(&cobra.Command{Use: "exit-codes", Short: "what each exit code means", Long: exitCodesHelp})
	for _, c := range commands() {
		name, _, _ := strings.Cut(c.use, " ")
		cmd := &cobra.Command{
			Use:               c.use,
			Short:             c.summary,
			Long:              strings.TrimSpace(c.summary+".\n\n"+c.long) + "\n\n" + exitCodesPointer,
			Example:           examples[name],
			Args:              cobra.ArbitraryArgs,
			ValidArgsFunction: c.complete,
		}
		run := c.define(env, cmd.Flags())
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			*ran = true
			return run(cmd.Context(), args)
		}
		cmd.SetFlagErrorFunc(flagError)
		complete.RegisterFlags(name, cmd, recipeTargets)
		root.AddCommand(cmd)
	}
	return root
}

// flagError is a usage error that names the closest flag, instead of the
// whole usage text.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if msg == "unknown flag: --json" {
		return usageErr("%s has no --json: it prints no data to format (the commands that do: %s)", cmd.CommandPath(), strings.Join(jsonCommands(cmd.Root()), ", "))
	}
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
		if c := suggest.Closest(name, names); c != "" {
			msg += fmt.Sprintf("; did you mean --%s?", c)
		}
	}
	return usageErr("%s (see `%s --help`)", msg, cmd.CommandPath())
}

// subcommandErr refuses an unknown subcommand word (cache list, toolchain
// lst) with the closest one, as cobra does for commands.
func subcommandErr(cmd string, pos []string, valid []string, usage string) error {
	if len(pos) == 0 {
		return usageErr("%s", usage)
	}
	if c := suggest.Closest(pos[0], valid); c != "" && c != pos[0] {
		return usageErr("unknown %s subcommand %q: did you mean %q? (%s)", cmd, pos[0], c, usage)
	}
	return usageErr("%s", usage)
}

// noJSON refuses --json for what prints no data, saying what does.
func noJSON(what, instead string) error {
	return usageErr("%s prints no data to format: --json applies to %s", what, instead)
}

// jsonCommands are the commands that take --json.
func jsonCommands(root *cobra.Command) []string {
	var names []string
	for _, c := range root.Commands() {
		if c.Flags().Lookup("json") != nil {
			names = append(names, c.Name())
		}
	}
	return names
}

// Main runs edgepipe with args (without the program name) and returns the
// exit code.
func Main(ctx context.Context, args []string, env *Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	var ran bool
	root := newRootRan(env, &ran)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil && !ran && !isExitError(err) {
		// cobra's own: an unknown command (its message carries the "did
		// you mean"), or arguments a command cobra provides refused.
		err = usageErr("%s", strings.TrimSpace(err.Error()))
	}
	return exitCode(env, err)
}

func isExitError(err error) bool {
	var ee *ExitError
	return errors.As(err, &ee)
}

// exitCode prints err (its text neutralised: a step's error carries its
// tool's words) and returns its exit code.
func exitCode(env *Env, err error) int {
	if err == nil {
		return ExitOK
	}
	var diags recipe.Diagnostics
	var ee *ExitError
	switch {
	case errors.As(err, &diags):
		fmt.Fprintln(env.Stderr, safetext.Printable(diags.Error()))
		fmt.Fprintf(env.Stderr, "edgepipe: the recipe has %d error(s); nothing was run\n", diags.Count())
		return ExitUsage
	case errors.As(err, &ee):
		if ee.Err != nil && ee.Err.Error() != "" {
			fmt.Fprintf(env.Stderr, "edgepipe: %s\n", safetext.Printable(ee.Err.Error()))
		}
		return ee.Code
	case engine.IsInterrupted(err):
		fmt.Fprintln(env.Stderr, "edgepipe: interrupted; finished steps are cached, rerun to resume")
		return ExitInterrupted
	case publish.IsGateFailure(err):
		fmt.Fprintf(env.Stderr, "edgepipe: %s\n", safetext.Printable(err.Error()))
		return ExitGateFailed
	case errors.As(err, new(*atomicfile.NotRegularError)):
		// An output path naming a device, a FIFO or a folder: usage.
		fmt.Fprintf(env.Stderr, "edgepipe: %s\n", safetext.Printable(err.Error()))
		return ExitUsage
	}
	fmt.Fprintf(env.Stderr, "edgepipe: %s\n", safetext.Printable(err.Error()))
	return ExitStepFailed
}

// common flags shared by the commands that load a recipe and a cache.
type common struct {
	cacheDir  string
	jobs      int
	keepGoing bool
	json      bool
	out       string
	verbose   bool
	quiet     bool
	toolPath  string
	maxMemGB  float64
	force     bool
	verify    bool
	signKey   string
	noPush    bool
	remote    remotecache.Flags
	store     *remotecache.Store // opened by engine
	strict    bool               // a failed upload fails the step (step run)
}

func (c *common) register(fs *pflag.FlagSet, env *Env, runFlags bool) {
	fs.StringVar(&c.cacheDir, "cache-dir", env.Getenv("EDGEPIPE_CACHE"), "cache folder (env EDGEPIPE_CACHE; default ~/.cache/edgepipe)")
	fs.StringVar(&c.toolPath, "tool-path", env.Getenv("EDGEPIPE_TOOL_PATH"), "folders searched first for tools by name, ':'-separated (env EDGEPIPE_TOOL_PATH)")
	fs.BoolVar(&c.json, "json", false, "machine-readable output (run: JSON-lines events)")
	fs.BoolVarP(&c.verbose, "verbose", "v", false, "verbose: copy tool output to the terminal")
	fs.BoolVarP(&c.quiet, "quiet", "q", false, "quiet: no progress lines, only errors and the run's summary")
	c.remote.Register(fs, env.Getenv)
	if !runFlags {
		return
	}
	fs.IntVarP(&c.jobs, "jobs", "j", 0, "steps run at once (default: the recipe's resources.jobs, else the number of cores)")
	fs.BoolVar(&c.keepGoing, "keep-going", false, "after a failure, finish independent branches")
	fs.StringVarP(&c.out, "out", "o", "", "publish folder (default artifacts/<recipe name>)")
	fs.Float64Var(&c.maxMemGB, "max-memory", 0, "memory budget in GB (1e9 bytes, as every memory figure) for steps running at once (default: the recipe's, else the machine's)")
	fs.BoolVar(&c.force, "force", false, "rerun every step, ignoring cache hits")
	fs.BoolVar(&c.verify, "verify", false, "rehash every input and cached output instead of trusting file stats")
	fs.BoolVar(&c.noPush, "no-push", false, "publish locally only: skip the targets' publish: remotes")
	fs.StringVar(&c.signKey, "sign-key", "", "sign each target's provenance with this private key (`FILE`, PEM PKCS#8, ECDSA P-256 or ed25519; env "+provenance.SigningKeyEnv+": a path or the PEM itself)")
}
