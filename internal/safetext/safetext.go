// Package safetext neutralises text from tools and files before a person
// reads it, on a terminal or in a report: control characters are dropped,
// so what a tool printed cannot drive the terminal it is shown on (clear
// the screen, set the window title, plant an OSC 8 hyperlink, move the
// cursor over earlier lines) nor break a report's markup. Without its ESC
// (or C1 introducer) an escape sequence is inert text.
package safetext

import (
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// Printable drops control characters (C0 but tab, line feed and carriage
// return; DEL; C1), the non-characters U+FFFE and U+FFFF, and bytes that
// are not UTF-8.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if keep(r) {
			return r
		}
		return -1
	}, s)
}

func keep(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return true
	case r < 0x20 || r >= 0x7f && r <= 0x9f:
		return false
	case r == 0xFFFE || r == 0xFFFF || r == utf8.RuneError:
		return false
	}
	return true
}

// Writer passes a stream (a tool's live output) through Printable. A
// UTF-8 sequence split across writes is held until it is whole, so a C1
// control cut in two is still dropped. Safe for concurrent writers.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	pending []byte
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := append(w.pending, p...)
	// Hold back a trailing incomplete rune (at most 3 bytes).
	cut := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	w.pending = append([]byte(nil), b[cut:]...)
	if _, err := io.WriteString(w.w, Printable(string(b[:cut]))); err != nil {
		return 0, err
	}
	return len(p), nil
}
