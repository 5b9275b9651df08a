package yamlsyntax

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// problem is a Problem without its hint, which the table checks by its
// start only.
type problem struct {
	Line, Col int
	Msg       string
}

func TestExplain(t *testing.T) {
	const (
		tabs     = "tabs are not allowed in YAML indentation; use spaces"
		listOpen = "invalid YAML: a [ list is not closed"
		mapOpen  = "invalid YAML: a { mapping is not closed"
		colon    = "invalid YAML: unexpected ':' here"
		lineUp   = "invalid YAML: this line does not line up with the keys around it"
		badStart = "invalid YAML: a value cannot start with this character"
		control  = "invalid YAML: this line holds a control character"
		notUTF8  = "invalid YAML: the file is not valid UTF-8 text"
		unclosed = "invalid YAML: the file ends inside a quoted string or bracket opened here"
		noAnchor = "invalid YAML: unknown anchor 'nope' referenced"
	)
	for _, tc := range []struct {
		name string
		src  string
		want []problem
	}{
		{"every tab-indented line from the first", "a: 1\nb:\n\tc: 2\n  d: 3\n\te: 4\n",
			[]problem{{3, 1, tabs}, {5, 1, tabs}}},
		{"a tab after spaces", "a:\n  \tb: 1\n", []problem{{2, 3, tabs}}},
		{"a second colon in a value", "name: a: b\n", []problem{{1, 8, colon}}},
		{"a second colon after a URL's", "source: https://x.org/a: b\n", []problem{{1, 24, colon}}},
		// The library blames line 1, where the document starts; the list
		// opens on line 2.
		{"an unclosed list", "x: 1\ntargets: [a, b\nnext: 1\n", []problem{{2, 10, listOpen}}},
		{"an unclosed list, CRLF", "a: 1\r\nb: [x\r\nc: 1\r\n", []problem{{2, 4, listOpen}}},
		{"an unclosed mapping", "model: {source: x\nnext: 1\n", []problem{{1, 8, mapOpen}}},
		{"a missing comma in a flow mapping", "targets:\n  a: {device: x, format: y}\n  b: {device: x format: y}\n",
			[]problem{{3, 6, mapOpen}}},
		{"a key out of line", "a:\n  b: 1\n c: 2\n", []problem{{3, 2, lineUp}}},
		{"a list item among keys", "k: 1\n- x\n", []problem{{2, 1, lineUp}}},
		{"an unknown alias", "a: 1\nb: [1, *nope]\n", []problem{{2, 8, noAnchor}}},
		{"a value starting with @", "a: 1\nb: @x\n", []problem{{2, 1, badStart}}},
		{"a control character", "a: 1\nb: x\x01y\n", []problem{{2, 1, control}}},
		{"not UTF-8", "a: \xff\n", []problem{{1, 1, notUTF8}}},
		{"an unterminated quote", "a: 1\nb: \"open\nc: 2\n", []problem{{2, 1, unclosed}}},
		// On the first line the library names the end of the file instead.
		{"an unterminated quote on the first line", "a: 'open\nb: 1\nc: 2\nd: 3\n", []problem{{1, 1, unclosed}}},
		{"multi-byte characters before the colon", "name: café: b\n", []problem{{1, 11, colon}}},
		{"no final line break", "a: 1\nb: [x", []problem{{2, 4, listOpen}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parseAll([]byte(tc.src))
			if err == nil {
				t.Fatalf("%q parses", tc.src)
			}
			var got []problem
			for _, p := range Explain(err, []byte(tc.src)) {
				got = append(got, problem{p.Line, p.Col, p.Msg})
				if p.Hint == "" {
					t.Errorf("%+v has no fix", p)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A problem the explanations do not know is passed on as the library
// says it, without a made-up fix; an error without a line points at the
// last line.
func TestExplainUnknownProblem(t *testing.T) {
	data := []byte("a: 1\nb: 2\n")
	got := Explain(errors.New("yaml: something new went wrong"), data)
	want := []Problem{{Line: 2, Col: 1, Msg: "invalid YAML: something new went wrong"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// A line the file does not have (the library counts one past the
	// end) is the last line.
	got = Explain(errors.New("yaml: line 9: something"), data)
	if len(got) != 1 || got[0].Line != 2 {
		t.Errorf("got %+v, want line 2", got)
	}
	if got := Explain(errors.New("yaml: line 1: x"), nil); len(got) != 1 || got[0].Line != 1 || got[0].Col != 1 {
		t.Errorf("an empty file: %+v", got)
	}
}

// Past the rescan budget the search gives up (a big file must not cost
// quadratic time) and the library's line stands. The budget counts the
// bytes parsed over all tries: some hundred prefixes of a file of a few
// hundred KiB exceed it, one try near the end does not.
func TestExplainLargeFile(t *testing.T) {
	var b bytes.Buffer
	pad := strings.Repeat("c", 1000)
	for i := 0; b.Len() < 150<<10; i++ {
		fmt.Fprintf(&b, "k%d: v # %s\n", i, pad)
	}
	b.WriteString("bad: a: b\n")
	err := parseAll(b.Bytes())
	if err == nil {
		t.Fatal("parses")
	}
	lines := splitLines(b.Bytes())
	if n := firstFailingLine(lines, 1, "mapping values are not allowed in this context"); n != 0 {
		t.Errorf("firstFailingLine = %d past its budget, want 0", n)
	}
	// Within the budget (the library's line is near), it is found.
	if n := firstFailingLine(lines, len(lines)-1, "mapping values are not allowed in this context"); n != len(lines) {
		t.Errorf("firstFailingLine from near the end = %d, want %d", n, len(lines))
	}
	got := Explain(err, b.Bytes())
	if len(got) != 1 || got[0].Line != len(lines) || got[0].Col != 7 {
		t.Errorf("got %+v, want the last line (%d), column 7", got, len(lines))
	}
}

func TestSplitLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"a", []string{"a"}},
		{"a\n", []string{"a\n"}},
		{"a\nb", []string{"a\n", "b"}},
		{"a\r\nb\r\n", []string{"a\r\n", "b\r\n"}},
		{"a\rb\r", []string{"a\r", "b\r"}},
		{"a\n\nb", []string{"a\n", "\n", "b"}},
		{"a\u0085b\u2028c\u2029d", []string{"a\u0085", "b\u2028", "c\u2029", "d"}},
		{"é\nü", []string{"é\n", "ü"}},
	} {
		var got []string
		for _, l := range splitLines([]byte(tc.in)) {
			got = append(got, string(l))
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitLines(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTabInIndent(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"\ta", 1}, {"  \ta", 3}, {"a\tb", 0}, {"  a", 0}, {"", 0}, {"   ", 0}, {"\t", 1},
	} {
		if got := tabInIndent([]byte(tc.in)); got != tc.want {
			t.Errorf("tabInIndent(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestProblemColumn(t *testing.T) {
	for _, tc := range []struct {
		line, problem string
		want          int
	}{
		{"  a: *x", "unknown anchor 'x' referenced", 6},
		{"  a: *y", "unknown anchor 'x' referenced", 3}, // not on this line: its start
		{"a: [1, [2", "did not find expected ',' or ']'", 8},
		{"a: {b: {c", "did not find expected ',' or '}'", 8},
		{"a: b:c: d", "mapping values are not allowed in this context", 7},
		{"a: b:", "mapping values are not allowed in this context", 5},
		{"a: b:\r\n", "mapping values are not allowed in this context", 5},
		{"ab", "mapping values are not allowed in this context", 1},
		{"\t  x", "anything", 4},
		{"   ", "anything", 1},
		{"ü: ö: x", "mapping values are not allowed in this context", 5},
	} {
		if got := problemColumn([]byte(tc.line), tc.problem); got != tc.want {
			t.Errorf("problemColumn(%q, %q) = %d, want %d", tc.line, tc.problem, got, tc.want)
		}
	}
}
