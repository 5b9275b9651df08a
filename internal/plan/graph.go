package plan

import (
	"fmt"
	"io"
	"strings"
)

// dotQuoter escapes what ends or escapes a DOT quoted string. Go's %q is
// not DOT: it doubles the backslash of a \n line break, which Graphviz then
// prints as the two characters.
var dotQuoter = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// dotQuote is s as a DOT quoted string.
func dotQuote(s string) string { return `"` + dotQuoter.Replace(s) + `"` }

// WriteDot writes the step graph for Graphviz.
func (p *Plan) WriteDot(w io.Writer) {
	fmt.Fprintf(w, "digraph %s {\n  rankdir=LR;\n", dotQuote(p.Recipe.Name))
	for _, s := range p.Steps {
		// A line break between the id and the kind, centred (DOT's \n).
		fmt.Fprintf(w, "  %s [label=%s];\n", dotQuote(s.ID), dotQuote(s.ID+"\n("+s.Kind+")"))
	}
	for _, s := range p.Steps {
		for _, n := range s.Needs {
			fmt.Fprintf(w, "  %s -> %s;\n", dotQuote(n), dotQuote(s.ID))
		}
	}
	fmt.Fprintln(w, "}")
}

// WriteMermaid writes the step graph as a Mermaid flowchart.
func (p *Plan) WriteMermaid(w io.Writer) {
	fmt.Fprintln(w, "flowchart LR")
	ids := map[string]string{}
	for i, s := range p.Steps {
		ids[s.ID] = fmt.Sprintf("s%d", i)
		fmt.Fprintf(w, "  %s[\"%s<br/>(%s)\"]\n", ids[s.ID], s.ID, s.Kind)
	}
	for _, s := range p.Steps {
		for _, n := range s.Needs {
			fmt.Fprintf(w, "  %s --> %s\n", ids[n], ids[s.ID])
		}
	}
}
