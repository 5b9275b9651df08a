package recipe

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
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
	// More, when set, makes this the line that stands for that many
	// problems not listed (found past MaxDiagnostics); it sorts last.
	More int `json:"more,omitempty"`
}

// MaxDiagnostics is how many problems one pass keeps; MaxShown how many an
// error message lists before "and N more".
const (
	MaxDiagnostics = 200
	MaxShown       = 50
)

// maxEcho caps a value quoted back in a message: a 2 MB key is shown by
// its start and its length.
const maxEcho = 120

// Clip shortens s to its first maxEcho bytes (on a rune boundary) plus
// how long it was.
func Clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}

// clipArgs clips the string arguments of a message.
func clipArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if s, ok := a.(string); ok {
			a = Clip(s)
		}
		out[i] = a
	}
	return out
}

// String is "FILE:LINE:COL: message", plus an indented "hint:" line when
// there is a fix to suggest.
func (d Diagnostic) String() string {
	if d.More > 0 {
		return fmt.Sprintf("and %d more problems not listed: fix these and run again", d.More)
	}
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
	var lines []string
	more := 0
	for _, diag := range d {
		switch {
		case diag.More > 0:
			more += diag.More
		case len(lines) < MaxShown:
			lines = append(lines, diag.String())
		default:
			more++
		}
	}
	if more > 0 {
		lines = append(lines, Diagnostic{More: more}.String())
	}
	return strings.Join(lines, "\n")
}

// Count is how many problems d stands for, those not listed included.
func (d Diagnostics) Count() int {
	n := 0
	for _, diag := range d {
		n += max(diag.More, 1)
	}
	return n
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
		if (d[i].More > 0) != (d[j].More > 0) {
			return d[j].More > 0
		}
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
