package engine

import (
	"io"
	"testing"
)

// A progress line names the program, or the script Python runs.
func TestToolName(t *testing.T) {
	for argv, want := range map[*[]string]string{
		{"/x/bin/llama-quantize", "in.gguf"}:                   "llama-quantize",
		{"/env/bin/python3", "-u", "/h/hf_perplexity.py", "x"}: "hf_perplexity.py",
		{"/env/bin/python"}:                                    "python",
		{}:                                                     "",
	} {
		if got := toolName(*argv); got != want {
			t.Errorf("%v: %q, want %q", *argv, got, want)
		}
	}
}

// Without a progress callback, a tool's output goes to the log alone (or
// --verbose's writer); with one, through a scanner that reports to it.
func TestToolOutput(t *testing.T) {
	e := &Engine{}
	if w := e.toolOutput("s", []string{"tool"}); w != nil {
		t.Errorf("no callback, no verbose: %T", w)
	}
	var got []int64
	e.opt.OnToolProgress = func(step, tool string, done, total int64) {
		if step != "s" || tool != "llama-quantize" {
			t.Errorf("%s %s", step, tool)
		}
		got = append(got, done, total)
	}
	w := e.toolOutput("s", []string{"/bin/llama-quantize"})
	if _, err := io.WriteString(w, "[  3/ 10] blk.0.attn_q.weight\n"); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 3 || got[1] != 10 {
		t.Errorf("reported %v", got)
	}
}
