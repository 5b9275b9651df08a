package termstatus

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Two steps running at once show two lines, each with its own clock, and
// the counts; a finished step's line goes and its permanent line stays.
func TestBoardLines(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	var out bytes.Buffer
	b := New(&out, 14, nil, func() time.Time { return now })
	b.Start("gguf-convert:f16", t0)
	now = t0.Add(30 * time.Second)
	b.Start("hf-perplexity:baseline", now)
	b.Detail("gguf-convert:f16", "download model.safetensors 45% of 1.2 GB")
	now = t0.Add(18*time.Minute + 2*time.Second)
	got := b.Lines()
	want := []string{
		"  18m02s   gguf-convert:f16: download model.safetensors 45% of 1.2 GB",
		"  17m32s   hf-perplexity:baseline",
		"  [0/14] 2 running, 18m02s",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	b.Done("gguf-convert:f16", "12:18:02 done     gguf-convert:f16 (1082.0s)")
	b.Done("gguf-convert:f16", "")
	if got := b.Lines(); len(got) != 2 || got[1] != "  [1/14] 1 running, 18m02s" {
		t.Errorf("after done: %q", got)
	}
	b.Close()
	// The region was erased as many lines up as it had drawn, every time.
	s := out.String()
	if !strings.Contains(s, "\x1b[3F\x1b[J12:18:02 done     gguf-convert:f16 (1082.0s)\n") {
		t.Errorf("the permanent line is not printed in place of the region:\n%q", s)
	}
	if !strings.HasSuffix(s, "\x1b[2F\x1b[J") {
		t.Errorf("Close does not erase the region: %q", s[len(s)-20:])
	}
}

// A line wider than the terminal is cut: a wrapped line would make the
// next redraw erase one line too few.
func TestBoardFitsWidth(t *testing.T) {
	var out bytes.Buffer
	b := New(&out, 1, func() int { return 20 }, nil)
	b.Start(strings.Repeat("x", 50), time.Now())
	b.Close()
	for _, l := range strings.Split(out.String(), "\n") {
		l = l[strings.LastIndex(l, "J")+1:]
		if n := len([]rune(l)); n > 19 {
			t.Errorf("line of %d columns on a 20-column terminal: %q", n, l)
		}
	}
}

func TestElapsed(t *testing.T) {
	for d, want := range map[time.Duration]string{
		4 * time.Second: "4s", 65 * time.Second: "1m05s", 3720 * time.Second: "1h02m",
	} {
		if got := Elapsed(d); got != want {
			t.Errorf("Elapsed(%v) = %s, want %s", d, got, want)
		}
	}
}

func TestColourOn(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if !ColourOn(true, env(nil)) {
		t.Error("no colour on a terminal")
	}
	if ColourOn(false, env(nil)) {
		t.Error("colour off a terminal")
	}
	if ColourOn(true, env(map[string]string{"NO_COLOR": "1"})) {
		t.Error("colour despite NO_COLOR")
	}
	if ColourOn(true, env(map[string]string{"TERM": "dumb"})) {
		t.Error("colour on a dumb terminal")
	}
	if Paint(false, Red, "fail") != "fail" || Paint(true, Red, "fail") != "\x1b[31mfail\x1b[0m" {
		t.Error("Paint")
	}
}
