package toolchain

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteList prints every toolchain (sizes as human writes them): kind, whether it is installed,
// its size on disk and last use; then folders no current lock names.
func WriteList(w io.Writer, root string, human func(int64) string) error {
	folders, err := Folders(root)
	if err != nil {
		return err
	}
	byDir := map[string]Folder{}
	for _, f := range folders {
		byDir[filepath.Base(f.Dir)] = f
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tINSTALLED\tSIZE\tLAST USED\tTOOLS")
	var total int64
	for _, s := range Specs() {
		state, size, used := "no", "-", "-"
		if in, err := Resolve(root, s.Name); err == nil {
			state = in.Summary()
		}
		if f, ok := byDir[s.DirName()]; ok && s.Kind != KindExternal {
			size, used = human(f.Size), f.LastUsed.Local().Format(time.DateTime)
			total += f.Size
		}
		if s.Kind == KindExternal {
			state = "(not installed by edgepipe)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\n", s.Name, s.Kind, state, size, used, strings.Join(s.Tools, " "))
	}
	for _, f := range folders {
		if !f.Current {
			total += f.Size
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", filepath.Base(f.Dir), "stale", "from another lock: `toolchain prune` removes it", human(f.Size), f.LastUsed.Local().Format(time.DateTime))
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "%s in %s\n", human(total), filepath.Join(root, "toolchains"))
	return nil
}
