package toolchain

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// ForRecipe keeps the statuses that count for a recipe: the tools of the
// toolchains it needs, and the tools edgepipe cannot install that its
// steps run (mlc_llm, the QNN SDK: listed with how to get them). local
// says which tools the recipe or --tool-path provide.
func ForRecipe(st []ToolStatus, needs []Need, tools []string, local func(string) bool) []ToolStatus {
	return slices.DeleteFunc(st, func(s ToolStatus) bool {
		if s.InstallCommand == "" && slices.Contains(tools, s.Name) && !local(s.Name) {
			return false
		}
		return !slices.ContainsFunc(needs, func(n Need) bool {
			return n.Name == s.Toolchain && (len(n.Tools) == 0 || slices.Contains(n.Tools, s.Name))
		})
	})
}

// WriteDoctor prints `edgepipe doctor`'s table.
func WriteDoctor(w io.Writer, st []ToolStatus) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tTOOLCHAIN\tFOUND\tVERSION\tPATH / HOW TO INSTALL")
	for _, s := range st {
		found, where := "no", s.InstallCommand
		if s.Found {
			found, where = "yes", s.Path
		}
		if where == "" {
			where = s.Note
		} else if !s.Found && s.Note != "" && !strings.Contains(s.Note, s.InstallCommand) {
			where += "  (" + s.Note + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Toolchain, found, s.Version, where)
	}
	tw.Flush()
}
