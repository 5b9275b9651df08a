package reproduce

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Print writes reports as `edgepipe reproduce` shows them: a verdict per
// folder, then each file, the gate's numbers and the steps that differ.
func Print(w io.Writer, reports []Report) {
	for _, r := range reports {
		verdict := "bit-identical"
		if !r.Identical {
			verdict = "NOT bit-identical"
		}
		fmt.Fprintf(w, "%s (%s, %s): %s\n", r.Dir, r.Target, r.Format, verdict)
		logs := 0
		for _, f := range r.Files {
			if f.Status == Log {
				logs++
				continue
			}
			line := fmt.Sprintf("  %-10s %s", f.Status, f.Path)
			switch f.Status {
			case Differs:
				line += fmt.Sprintf(" (published sha256 %s, rebuilt %s)", f.Published, f.Rebuilt)
			case Tampered:
				line += " (" + f.OnDisk + ")"
			}
			fmt.Fprintln(w, line)
		}
		if logs > 0 {
			fmt.Fprintf(w, "  %d step log(s) not compared: they record times and paths\n", logs)
		}
		if len(r.SourceDiffers) > 0 {
			fmt.Fprintf(w, "  source differs from the manifest's: %s\n", strings.Join(r.SourceDiffers, ", "))
		}
		if p := r.Perplexity; p != nil {
			fmt.Fprintf(w, "  perplexity: published %.4f, rebuilt %.4f (delta %+.4f; baselines %.4f and %.4f)\n",
				p.Published, p.Rebuilt, p.Delta, p.Baseline, p.RebuiltBaseline)
			if r.Identical && (p.Delta != 0 || p.Baseline != p.RebuiltBaseline) {
				fmt.Fprintln(w, "  note: the files are identical but the gate measured other numbers: the evaluation text or the evaluating tools differ from the original run's")
			}
		}
		counts := map[string]int{}
		for _, s := range r.Steps {
			counts[s.Status]++
		}
		if len(r.Steps) > 0 {
			fmt.Fprintf(w, "  steps: %d made the same files as the original still in the cache, %d other files, %d original not in the cache\n",
				counts[Identical], counts[Differs], counts[OriginalGone])
		}
		for _, s := range r.Steps {
			if s.Status == Differs {
				fmt.Fprintf(w, "  step %s: output differs from the cached original (%s)\n", s.ID, strings.Join(s.Files, ", "))
			}
			if s.Argv != "" {
				fmt.Fprintf(w, "  step %s: command line differs: %s\n", s.ID, s.Argv)
			}
		}
	}
}

// CountDiffering is how many reports are not bit-identical.
func CountDiffering(rs []Report) int {
	n := 0
	for _, r := range rs {
		if !r.Identical {
			n++
		}
	}
	return n
}

// ScratchFolder makes the folder a reproduction works in; cleanup removes
// it unless it is to be kept.
func ScratchFolder(dir string, keep bool) (string, func(), error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "edgepipe-reproduce-")
		if err != nil {
			return "", nil, err
		}
		dir = d
	} else {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			return "", nil, refused("--scratch %s is not empty: a rebuild must not start from anything made before; name an empty or new folder", dir)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	if keep {
		return abs, func() {}, nil
	}
	return abs, func() { os.RemoveAll(abs) }, nil
}
