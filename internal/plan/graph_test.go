package plan

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/recipe"
)

func graphPlan(t *testing.T) *Plan {
	t.Helper()
	r, err := recipe.Parse("r.yaml", []byte("edgepipe: 1\nname: m\nmodel: {source: ./model}\ntargets:\n  t: {device: x86-laptop, format: gguf-q8_0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Expand(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// DOT labels break the line with DOT's own \n: Go's %q wrote \\n, which
// Graphviz printed as a backslash and an n.
func TestWriteDotLabels(t *testing.T) {
	var b bytes.Buffer
	graphPlan(t).WriteDot(&b)
	out := b.String()
	if !strings.Contains(out, `"source" [label="source\n(fetch)"];`) || strings.Contains(out, `\\n`) {
		t.Errorf("dot:\n%s", out)
	}
	if got := dotQuote("a \"b\" \\ c\nd"); got != `"a \"b\" \\ c\nd"` {
		t.Errorf("dotQuote: %s", got)
	}
}

// Where Graphviz is installed, what it renders has the id and the kind on
// lines of their own, and no backslash.
func TestWriteDotRendersInGraphviz(t *testing.T) {
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("Graphviz's dot is not installed; TestWriteDotLabels checks the text")
	}
	var in bytes.Buffer
	graphPlan(t).WriteDot(&in)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dot, "-Tsvg")
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dot: %v", err)
	}
	svg := string(out)
	if strings.Contains(svg, `\n`) || !strings.Contains(svg, ">source</text>") || !strings.Contains(svg, ">(fetch)</text>") {
		t.Errorf("dot rendered:\n%s", svg)
	}
}
