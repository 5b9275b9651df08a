// Package yamlsyntax finds where a YAML syntax error really is in a
// recipe, and says it as what the user most likely did, with a fix: the
// YAML library reports a line only, often the wrong one.
package yamlsyntax

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

var yamlLineRE = regexp.MustCompile(`^line (\d+): (.*)$`)

// Problem is where a syntax error is (1-based; Col 0 when unknown), what
// it is and its fix.
type Problem struct {
	Line, Col int
	Msg, Hint string
}

// Explain locates and rewords a YAML syntax error of data. The YAML
// library reports only a line, and for errors found while parsing a block
// or flow collection that line is where the collection starts (and off by
// one), not where the mistake is; so the line is recomputed as the first
// line whose inclusion makes the file unparsable with the same problem.
// A tab in indentation is reported on every line that has one.
func Explain(err error, data []byte) []Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	yamlLine := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		yamlLine, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	lines := splitLines(data)
	from := yamlLine
	if msg == "found unexpected end of stream" {
		// The library takes a quote opened on the first line (its line 0)
		// for no line at all and names the end of the file instead; the
		// first prefix that ends inside the quote is where it opened.
		from = 1
	}
	line := firstFailingLine(lines, from, msg)
	if line == 0 {
		line = yamlLine
	}
	// Past the end (a file not ending in a line break) or unknown: the
	// last line is the best place to point at.
	if line > len(lines) || line == 0 {
		line = len(lines)
	}

	if line > 0 && line <= len(lines) {
		if col := tabInIndent(lines[line-1]); col > 0 {
			// Every later tab-indented line would be the next error.
			var out []Problem
			for i := line - 1; i < len(lines); i++ {
				if col := tabInIndent(lines[i]); col > 0 {
					out = append(out, Problem{Line: i + 1, Col: col,
						Msg:  "tabs are not allowed in YAML indentation; use spaces",
						Hint: "replace the tab with spaces (most editors can convert tabs to spaces on save)"})
				}
			}
			return out
		}
	}
	pr := Problem{Line: line}
	if line > 0 && line <= len(lines) {
		pr.Col = problemColumn(lines[line-1], msg)
	}
	pr.Msg, pr.Hint = explainYAMLProblem(msg)
	return []Problem{pr}
}

// splitLines splits after each line break YAML counts: LF, CRLF, a lone
// CR, and the Unicode NEL, LS and PS, so line numbers agree with the YAML
// library's.
func splitLines(data []byte) [][]byte {
	var lines [][]byte
	start := 0
	for i := 0; i < len(data); {
		n := 0
		switch {
		case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
			n = 2
		case data[i] == '\n' || data[i] == '\r':
			n = 1
		case bytes.HasPrefix(data[i:], []byte("\u0085")), bytes.HasPrefix(data[i:], []byte("\u2028")),
			bytes.HasPrefix(data[i:], []byte("\u2029")):
			_, n = utf8.DecodeRune(data[i:])
		}
		if n == 0 {
			i++
			continue
		}
		i += n
		lines = append(lines, data[start:i])
		start = i
	}
	if start < len(data) || len(lines) == 0 {
		lines = append(lines, data[start:])
	}
	return lines
}

// maxRescanBytes bounds the work spent locating a syntax error (the rescan
// is quadratic in the file size); past it the YAML library's line stands.
const maxRescanBytes = 4 << 20

// firstFailingLine returns the smallest n >= from-1 such that the first n
// lines fail to parse with problem, or 0 when none does within the budget.
func firstFailingLine(lines [][]byte, from int, problem string) int {
	start := max(from-1, 1)
	prefixLen := 0
	for i := 0; i < start-1 && i < len(lines); i++ {
		prefixLen += len(lines[i])
	}
	spent := 0
	for n := start; n <= len(lines); n++ {
		prefixLen += len(lines[n-1])
		spent += prefixLen
		if spent > maxRescanBytes {
			return 0
		}
		if err := parseAll(bytes.Join(lines[:n], nil)); err != nil && strings.HasSuffix(err.Error(), problem) {
			return n
		}
	}
	return 0
}

func parseAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// tabInIndent returns the 1-based column of a tab in the line's leading
// whitespace, or 0.
func tabInIndent(line []byte) int {
	for i, c := range line {
		switch c {
		case ' ':
		case '\t':
			return i + 1
		default:
			return 0
		}
	}
	return 0
}

var unknownAnchorRE = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// problemColumn guesses the column of a syntax problem on its line, which
// the YAML library does not report: the offending alias or second ':' when
// the problem names one, else the line's first character.
func problemColumn(line []byte, problem string) int {
	if m := unknownAnchorRE.FindStringSubmatch(problem); m != nil {
		if i := bytes.Index(line, []byte("*"+m[1])); i >= 0 {
			return column(line, i)
		}
	}
	for open, closed := range map[string]string{"[": "]", "{": "}"} {
		if strings.HasPrefix(problem, "did not find expected ',' or '"+closed+"'") {
			if i := bytes.LastIndex(line, []byte(open)); i >= 0 {
				return column(line, i)
			}
		}
	}
	if problem == "mapping values are not allowed in this context" {
		// The first ": " ends the key; a second one is the stray colon.
		if first := indexColon(line, 0); first >= 0 {
			if second := indexColon(line, first+1); second >= 0 {
				return column(line, second)
			}
		}
	}
	return firstNonBlank(line)
}

// column converts a byte offset to a 1-based column in characters, as
// YAML counts them.
func column(line []byte, offset int) int {
	return utf8.RuneCount(line[:offset]) + 1
}

// indexColon finds a ':' at or after from that YAML reads as a key
// separator: followed by a space or the end of the line.
func indexColon(line []byte, from int) int {
	for i := from; i < len(line); i++ {
		if line[i] != ':' {
			continue
		}
		if i+1 == len(line) || line[i+1] == ' ' || line[i+1] == '\n' || line[i+1] == '\r' {
			return i
		}
	}
	return -1
}

func firstNonBlank(line []byte) int {
	for i, c := range line {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return i + 1
		}
	}
	return 1
}

// explainYAMLProblem rewords the YAML scanner's common complaints as what
// the user most likely did, with a fix.
func explainYAMLProblem(problem string) (msg, hint string) {
	switch {
	case problem == "did not find expected key":
		return "invalid YAML: this line does not line up with the keys around it",
			"keys of one mapping start in the same column, and a list item (- ...) cannot appear among them; check this line's indentation"
	case problem == "mapping values are not allowed in this context":
		return "invalid YAML: unexpected ':' here",
			"quote a value that contains ': ' (for example \"a: b\"), or indent this key under the one it belongs to"
	case problem == "could not find expected ':'":
		return "invalid YAML: expected a ':' after a key",
			"write key: value; a value that continues on this line must be indented more than its key, or quoted"
	case problem == "found character that cannot start any token":
		return "invalid YAML: a value cannot start with this character",
			"quote values that start with @, ` or %"
	case strings.HasPrefix(problem, "did not find expected ',' or ']'"):
		return "invalid YAML: a [ list is not closed",
			"close it with ] on this line, or quote a value that contains [ or ,"
	case strings.HasPrefix(problem, "did not find expected ',' or '}'"):
		return "invalid YAML: a { mapping is not closed",
			"close it with } on this line, or quote a value that contains { or ,"
	case problem == "found unexpected end of stream":
		return "invalid YAML: the file ends inside a quoted string or bracket opened here",
			"close the quote or bracket"
	case problem == "control characters are not allowed":
		return "invalid YAML: this line holds a control character",
			"remove it; a recipe is plain text, where only tabs (outside indentation) and line breaks may appear below space"
	case strings.Contains(problem, "UTF-8"):
		return "invalid YAML: the file is not valid UTF-8 text",
			"save the recipe as UTF-8"
	case strings.HasPrefix(problem, "unknown anchor"):
		return "invalid YAML: " + problem,
			"define the anchor (&name) before the alias (*name) that uses it"
	}
	return "invalid YAML: " + problem, ""
}
