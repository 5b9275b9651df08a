package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

//go:generate sh -c "go run ./cmd/gencli > ../../docs/cli-commands.md"

// RegenerateReferenceCommand is what rewrites docs/cli-commands.md, run
// from the repository root.
const RegenerateReferenceCommand = "go generate ./internal/cli"

// WriteCommandReference writes the CLI reference in Markdown, generated
// from the command tree: for each command its usage line, what it does and
// its flags as --help prints them. Flag defaults are the ones an empty
// environment gives (EDGEPIPE_CACHE and the like unset), so the page is the
// same on every machine.
func WriteCommandReference(w io.Writer) error {
	env := &Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	root := newRoot(env)
	var b bytes.Buffer
	b.WriteString("# CLI commands\n\n")
	b.WriteString("<!-- Generated from the command tree by `" + RegenerateReferenceCommand + "`; do not edit.\n")
	b.WriteString("     internal/cli's TestCommandReferenceCurrent fails when it is out of date. -->\n\n")
	b.WriteString("Every command of `" + root.Name() + "`, with its flags as `edgepipe CMD --help` prints them.\n")
	b.WriteString("The prose reference (what the commands print, environment variables, lock files,\n")
	b.WriteString("the remote cache) is [cli.md](cli.md).\n\n")
	b.WriteString("`" + root.Name() + "`: " + root.Short + ". `edgepipe -V` (or `edgepipe version`) prints the version.\n\n")
	b.WriteString("`edgepipe help exit-codes` prints the exit codes:\n\n")
	b.WriteString("```\n" + exitCodesHelp + "\n```\n\n")
	// In the order of commands() (the help's order is alphabetical), then
	// cobra's completion.
	var names []string
	for _, c := range commands() {
		name, _, _ := strings.Cut(c.use, " ")
		names = append(names, name)
	}
	names = append(names, "completion")
	for _, name := range names {
		c, _, err := root.Find([]string{name})
		if err != nil || c == root {
			return fmt.Errorf("command %q is not in the tree", name)
		}
		writeCommand(&b, c)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func writeCommand(b *bytes.Buffer, c *cobra.Command) {
	fmt.Fprintf(b, "## %s\n\n", c.CommandPath())
	fmt.Fprintf(b, "```\n%s\n```\n\n", c.UseLine())
	fmt.Fprintf(b, "%s.\n\n", strings.TrimSuffix(c.Short, "."))
	if c.HasExample() {
		fmt.Fprintf(b, "Examples:\n\n```\n%s\n```\n\n", strings.TrimRight(c.Example, "\n"))
	}
	if flags := c.NonInheritedFlags().FlagUsages(); strings.TrimSpace(flags) != "" {
		fmt.Fprintf(b, "```\n%s```\n\n", flags)
	}
}
