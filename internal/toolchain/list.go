package toolchain

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// ListEntry is one row of `toolchain list --json`.
type ListEntry struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Installed is what the install holds (versions), "" when it is not
	// installed; Stale marks a folder no current lock names.
	Installed  string     `json:"installed,omitempty"`
	Stale      bool       `json:"stale,omitempty"`
	Dir        string     `json:"dir,omitempty"`
	SizeBytes  int64      `json:"size_bytes"`
	FreesBytes int64      `json:"frees_bytes"`
	LastUsed   *time.Time `json:"last_used,omitempty"`
	Tools      []string   `json:"tools,omitempty"`
}

// List is what WriteList prints, as data: every toolchain, then the stale
// folders.
func List(root string) ([]ListEntry, error) {
	entries, _, err := list(root)
	return entries, err
}

// list is List and the bytes the folders hold, each file once.
func list(root string) ([]ListEntry, int64, error) {
	folders, total, err := foldersAndTotal(root)
	if err != nil {
		return nil, 0, err
	}
	byDir := map[string]Folder{}
	for _, f := range folders {
		byDir[filepath.Base(f.Dir)] = f
	}
	var out []ListEntry
	for _, s := range Specs() {
		e := ListEntry{Name: s.Name, Kind: s.Kind, Tools: s.Tools}
		if in, err := Resolve(root, s.Name); err == nil {
			e.Installed = in.Summary()
		}
		if f, ok := byDir[s.DirName()]; ok && s.Kind != KindExternal {
			used := f.LastUsed
			e.Dir, e.SizeBytes, e.FreesBytes, e.LastUsed = f.Dir, f.Size, f.Own, &used
		}
		out = append(out, e)
	}
	for _, f := range folders {
		if !f.Current {
			used := f.LastUsed
			out = append(out, ListEntry{Name: filepath.Base(f.Dir), Kind: "stale", Stale: true, Dir: f.Dir, SizeBytes: f.Size, FreesBytes: f.Own, LastUsed: &used})
		}
	}
	return out, total, nil
}

// WriteList prints every toolchain (sizes as human writes them): kind, whether it is installed,
// its size on disk, what removing it frees and its last use; then folders no current lock names.
func WriteList(w io.Writer, root string, human func(int64) string) error {
	entries, total, err := list(root)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tINSTALLED\tSIZE\tFREES\tLAST USED\tTOOLS")
	for _, e := range entries {
		state, size, frees, used := e.Installed, "-", "-", "-"
		switch {
		case e.Stale:
			state = "from another lock: `toolchain prune` removes it"
		case e.Kind == KindExternal:
			state = "(not installed by edgepipe)"
		case state == "":
			state = "no"
		}
		if e.LastUsed != nil {
			size, frees, used = human(e.SizeBytes), human(e.FreesBytes), e.LastUsed.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, e.Kind, state, size, frees, used, strings.Join(e.Tools, " "))
	}
	tw.Flush()
	// The toolchains share files (uv links every environment's wheels from
	// its cache), so the total is not the column's sum.
	fmt.Fprintf(w, "%s in %s (each file once, however many toolchains link it; FREES is what removing one alone frees)\n", human(total), filepath.Join(root, "toolchains"))
	return nil
}
