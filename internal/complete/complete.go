// Package complete says what each edgepipe argument and flag value
// completes to in a shell: cobra writes the completion scripts (`edgepipe
// completion bash|zsh|fish|powershell`) and asks edgepipe itself
// (`edgepipe __complete`) through these functions.
package complete

import (
	"github.com/spf13/cobra"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// Words completes the first argument to one of w.
func Words(w ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return w, cobra.ShellCompDirectiveNoFileComp
	}
}

// NoArgs completes nothing.
func NoArgs(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// RecipeArg completes one recipe file.
func RecipeArg(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
}

// DirArgs completes folders.
func DirArgs(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveFilterDirs
}

// StepArgs completes step run PLAN.json STEP-ID.
func StepArgs(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return []string{"run"}, cobra.ShellCompDirectiveNoFileComp
	case 1:
		return []string{"json"}, cobra.ShellCompDirectiveFilterFileExt
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// ToolchainArgs completes install or list, then the toolchains edgepipe installs.
func ToolchainArgs(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return []string{"install", "list", "prune", "remove"}, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, s := range toolchain.Specs() {
		if s.Kind != toolchain.KindExternal {
			names = append(names, s.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// RegisterFlags says how the flag values of command name complete, by
// flag name; targets completes --target (it reads the recipe on the
// command line, which the caller knows how to load).
func RegisterFlags(name string, cmd *cobra.Command, targets cobra.CompletionFunc) {
	fixed := func(w ...string) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return w, cobra.ShellCompDirectiveNoFileComp
		}
	}
	files := func(ext ...string) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return ext, cobra.ShellCompDirectiveFilterFileExt
		}
	}
	dirs := func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveFilterDirs
	}
	for flag, f := range map[string]cobra.CompletionFunc{
		"device":    fixed(catalog.DeviceIDs()...),
		"platform":  fixed(edge.Platforms()...),
		"format":    fixed(catalog.FormatNames()...),
		"recipe":    files("yaml", "yml"),
		"output":    files("yaml", "yml"),
		"out":       dirs,
		"cache-dir": dirs,
		"scratch":   dirs,
		"for":       files("yaml", "yml"),
		"target":    targets,
		"task":      fixed("llm", "vision"),
	} {
		if name == "graph" && flag == "format" {
			f = fixed("dot", "mermaid")
		}
		if name == "init" && flag == "out" {
			f = files("yaml", "yml") // init's -o is the recipe it writes
		}
		if cmd.Flags().Lookup(flag) != nil {
			_ = cmd.RegisterFlagCompletionFunc(flag, f)
		}
	}
}
