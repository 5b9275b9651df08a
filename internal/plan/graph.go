package plan

import (
	"fmt"
	"io"
)

// WriteDot writes the step graph for Graphviz.
func (p *Plan) WriteDot(w io.Writer) {
	fmt.Fprintf(w, "digraph %q {\n  rankdir=LR;\n", p.Recipe.Name)
	for _, s := range p.Steps {
		fmt.Fprintf(w, "  %q [label=%q];\n", s.ID, s.ID+"\\n("+s.Kind+")")
	}
	for _, s := range p.Steps {
		for _, n := range s.Needs {
			fmt.Fprintf(w, "  %q -> %q;\n", n, s.ID)
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
