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
	fmt.Fprintln(tw, "NAME\tKIND\tINSTALLED\tSIZE\tFREES\tLAST USED\tTOOLS")
	for _, s := range Specs() {
		state, size, frees, used := "no", "-", "-", "-"
		if in, err := Resolve(root, s.Name); err == nil {
			state = in.Summary()
		}
		if f, ok := byDir[s.DirName()]; ok && s.Kind != KindExternal {
			size, frees, used = human(f.Size), human(f.Own), f.LastUsed.Local().Format(time.DateTime)
		}
		if s.Kind == KindExternal {
			state = "(not installed by edgepipe)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%v\n", s.Name, s.Kind, state, size, frees, used, strings.Join(s.Tools, " "))
	}
	dirs := make([]string, 0, len(folders))
	for _, f := range folders {
		dirs = append(dirs, f.Dir)
		if !f.Current {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", filepath.Base(f.Dir), "stale", "from another lock: `toolchain prune` removes it", human(f.Size), human(f.Own), f.LastUsed.Local().Format(time.DateTime))
		}
	}
	tw.Flush()
	// The toolchains share files (uv links every environment's wheels from
	// its cache), so the total is not the column's sum.
	fmt.Fprintf(w, "%s in %s (each file once, however many toolchains link it; FREES is what removing one alone frees)\n", human(MeasureDisk(dirs...).Total), filepath.Join(root, "toolchains"))
	return nil
}
