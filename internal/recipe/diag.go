package recipe

import (
	"sort"
	"strconv"
	"strings"
)

// String renders the position the way editors and compilers do, so a
// terminal can jump to it: FILE:LINE:COL, leaving out what is unknown.
func (p Pos) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		if b.Len() > 0 {
			b.WriteByte(':')
		}
		b.WriteString(strconv.Itoa(p.Line))
		if p.Col > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(p.Col))
		}
	}
	return b.String()
}

// Diagnostic is one problem found in a recipe: where, what, and how to fix it.
type Diagnostic struct {
	Pos  Pos    `json:"pos"`
	Msg  string `json:"message"`
	Hint string `json:"hint,omitempty"`
}

// String is "FILE:LINE:COL: message", plus an indented "hint:" line when
// there is a fix to suggest.
func (d Diagnostic) String() string {
	s := d.Msg
	if where := d.Pos.String(); where != "" {
		s = where + ": " + s
	}
	if d.Hint != "" {
		s += "\n  hint: " + d.Hint
	}
	return s
}

// Diagnostics is every problem found in one pass. It is an error so parse
// and validation results can travel as one; use Err to turn an empty list
// into a nil error.
type Diagnostics []Diagnostic

func (d Diagnostics) Error() string {
	lines := make([]string, len(d))
	for i, diag := range d {
		lines[i] = diag.String()
	}
	return strings.Join(lines, "\n")
}

// Err returns d as an error, or nil when d is empty. Returning a nil
// Diagnostics as an error would make a non-nil interface.
func (d Diagnostics) Err() error {
	if len(d) == 0 {
		return nil
	}
	return d
}

// Sort orders by file, line and column; problems at one place keep the
// order they were found in.
func (d Diagnostics) Sort() {
	sort.SliceStable(d, func(i, j int) bool {
		a, b := d[i].Pos, d[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}
