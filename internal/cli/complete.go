package cli

import (
	"slices"

	"github.com/spf13/cobra"
)

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
