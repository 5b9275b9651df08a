package safetext

import (
	"strings"
	"testing"
)

// What a hostile or careless tool prints: a screen clear, a window title
// (OSC 0, ended by BEL), an OSC 8 hyperlink (ended by ST), a C1 CSI.
const hostile = "before\x1b[2J\x1b[H\x1b]0;owned\x07 \x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\ \u009b31m after\ttab\r\n"

func TestPrintableDropsControls(t *testing.T) {
	got := Printable(hostile)
	for _, c := range []string{"\x1b", "\x07", "\u009b"} {
		if strings.Contains(got, c) {
			t.Errorf("%q kept %q", got, c)
		}
	}
	if want := "before[2J[H]0;owned ]8;;https://evil.example/\\click]8;;\\ 31m after\ttab\r\n"; got != want {
		t.Errorf("Printable = %q, want %q", got, want)
	}
	if got := Printable("é … 日本 \U0001F600"); got != "é … 日本 \U0001F600" {
		t.Errorf("printable text changed: %q", got)
	}
}

// A stream cut anywhere, even inside a C1 control's two bytes, comes out
// as Printable of the whole.
func TestWriterAcrossWrites(t *testing.T) {
	in := hostile + "é日\U0001F600\u0085end"
	for cut := range len(in) + 1 {
		var sb strings.Builder
		w := NewWriter(&sb)
		for _, part := range []string{in[:cut], in[cut:]} {
			if n, err := w.Write([]byte(part)); n != len(part) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		if got, want := sb.String(), Printable(in); got != want {
			t.Fatalf("cut at %d: %q, want %q", cut, got, want)
		}
	}
}
