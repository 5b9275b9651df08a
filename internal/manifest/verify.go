package manifest

import (
	"context"
	"fmt"
	"sort"
)

// Problem kinds.
const (
	Missing = "missing" // listed in the manifest, not in the folder
	Changed = "changed" // present, but its digest or size differs
	Extra   = "extra"   // in the folder, not listed in the manifest
)

// Problem is one difference between an artifact folder and its manifest.
// Want is what the manifest records and Got what the folder holds; each is
// empty where it does not apply.
type Problem struct {
	Path string
	Kind string
	Want string
	Got  string
}

func (p Problem) String() string {
	switch p.Kind {
	case Missing:
		return fmt.Sprintf("%s is missing (the manifest records %s)", p.Path, p.Want)
	case Changed:
		return fmt.Sprintf("%s has changed: the manifest records %s, the folder holds %s", p.Path, p.Want, p.Got)
	case Extra:
		return fmt.Sprintf("%s is not listed in the manifest (%s)", p.Path, p.Got)
	default:
		return fmt.Sprintf("%s: %s (want %s, got %s)", p.Path, p.Kind, p.Want, p.Got)
	}
}

// Verify re-hashes every file dir/manifest.json lists and reports, sorted by
// path, the files that are missing, changed or extra. The error is for a
// folder that cannot be checked at all (no or unreadable manifest, I/O).
func Verify(dir string) ([]Problem, error) {
	return VerifyContext(context.Background(), dir)
}

// VerifyContext is Verify with a context that can stop the hashing.
func VerifyContext(ctx context.Context, dir string) ([]Problem, error) {
	m, err := Read(dir)
	if err != nil {
		return nil, err
	}
	return verify(ctx, dir, m, false)
}

// verify compares dir with m. With durable set it fsyncs every file and
// directory it reads, so the folder is on disk before it is published.
func verify(ctx context.Context, dir string, m *Manifest, durable bool) ([]Problem, error) {
	entries, dirs, err := walk(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	found := make(map[string]entry, len(entries))
	for _, e := range entries {
		found[e.rel] = e
	}
	listed := make(map[string]bool, len(m.Files))
	var problems []Problem
	for _, f := range m.Files {
		listed[f.Path] = true
		want := describe(f.SHA256, f.Size)
		e, ok := found[f.Path]
		switch {
		case !ok:
			problems = append(problems, Problem{Path: f.Path, Kind: Missing, Want: want})
		case !e.mode.IsRegular():
			problems = append(problems, Problem{Path: f.Path, Kind: Changed, Want: want, Got: "a " + kindOf(e.mode) + ", not a plain file"})
		case e.size != f.Size:
			problems = append(problems, Problem{Path: f.Path, Kind: Changed, Want: want, Got: fmt.Sprintf("%d bytes", e.size)})
		default:
			sha, size, err := hashFile(ctx, e.abs, durable)
			if err != nil {
				return nil, fmt.Errorf("verify: %w", err)
			}
			if sha != f.SHA256 || size != f.Size {
				problems = append(problems, Problem{Path: f.Path, Kind: Changed, Want: want, Got: describe(sha, size)})
			}
		}
	}
	for _, e := range entries {
		if !listed[e.rel] {
			got := fmt.Sprintf("%d bytes", e.size)
			if !e.mode.IsRegular() {
				got = "a " + kindOf(e.mode)
			}
			problems = append(problems, Problem{Path: e.rel, Kind: Extra, Got: got})
		}
	}
	sortProblems(problems)
	if durable {
		for _, d := range dirs {
			if err := syncDir(d); err != nil {
				return nil, fmt.Errorf("verify: %w", err)
			}
		}
	}
	return problems, nil
}

func sortProblems(ps []Problem) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Path != ps[j].Path {
			return ps[i].Path < ps[j].Path
		}
		return ps[i].Kind < ps[j].Kind
	})
}
