package cli

import (
	"slices"

	"github.com/spf13/cobra"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// Shell completion comes from cobra (`edgepipe completion bash|zsh|fish|
// powershell`); what each argument and flag value completes to is here.

func words(w ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return w, cobra.ShellCompDirectiveNoFileComp
	}
}

func noArgs(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// recipeArg completes one recipe file.
func recipeArg(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
}

func dirArgs(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveFilterDirs
}

// stepArgs: step run PLAN.json STEP-ID.
func stepArgs(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return []string{"run"}, cobra.ShellCompDirectiveNoFileComp
	case 1:
		return []string{"json"}, cobra.ShellCompDirectiveFilterFileExt
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// toolchainArgs: install or list, then the toolchains edgepipe installs.
func toolchainArgs(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
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

// recipeTargets completes --target with the targets of the recipe named
// on the command line so far.
func recipeTargets(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	pl, err := loadPlan(args[len(args)-1])
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return pl.TargetNames(), cobra.ShellCompDirectiveNoFileComp
}

// registerFlagCompletions says how flag values complete, by flag name.
func registerFlagCompletions(name string, cmd *cobra.Command) {
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
		"target":    recipeTargets,
	} {
		if name == "graph" && flag == "format" {
			f = fixed("dot", "mermaid")
		}
		if cmd.Flags().Lookup(flag) != nil {
			_ = cmd.RegisterFlagCompletionFunc(flag, f)
		}
	}
}

// completionCommand prints cobra's completion script for a shell; the
// script asks edgepipe itself (edgepipe __complete) what completes.
func completionCommand(env *Env) *cobra.Command {
	const how = "bash: source <(edgepipe completion bash); zsh: source <(edgepipe completion zsh) after compinit; " +
		"fish: edgepipe completion fish | source; PowerShell: edgepipe completion powershell | Out-String | Invoke-Expression"
	shells := []string{"bash", "zsh", "fish", "powershell"}
	return &cobra.Command{
		Use:       "completion bash|zsh|fish|powershell",
		Short:     "print a shell completion script",
		Long:      "Print a shell completion script.\n\n" + how + "\n\n" + exitCodesHelp,
		ValidArgs: shells,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || !slices.Contains(shells, args[0]) {
				return usageErr("completion takes one shell: bash, zsh, fish or powershell (%s)", how)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(env.Stdout, true)
			case "zsh":
				return root.GenZshCompletion(env.Stdout)
			case "fish":
				return root.GenFishCompletion(env.Stdout, true)
			}
			return root.GenPowerShellCompletionWithDesc(env.Stdout)
		},
	}
}
