package proc

import (
	"bytes"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/edgepipe/edgepipe/internal/safetext"
)

const (
	// tailMaxBytes caps how far back Tail reads, so a log of gigabytes, or
	// one long line of progress-bar redraws, costs at most this much.
	tailMaxBytes = 1 << 20
	tailChunk    = 64 << 10
	// tailLineMax keeps one runaway line from flooding an error message.
	tailLineMax = 400
)

// Tail returns the last n lines of the file at path, reading backwards from
// its end. A missing or unreadable file has no lines. Lines are cleaned for
// display: "\r" redraws keep only what a terminal would show last, control
// characters (escape sequences) are dropped, and very long lines are cut.
func Tail(path string, n int) []string {
	return tailFrom(path, 0, n)
}

// tailFrom is Tail limited to the bytes from offset on, i.e. what one run
// appended to a shared log.
func tailFrom(path string, offset int64, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	return tailLines(f, offset, st.Size(), n)
}

func tailLines(r io.ReaderAt, from, end int64, n int) []string {
	if n <= 0 || end <= from {
		return nil
	}
	limit := max(from, end-tailMaxBytes)
	var buf []byte // the bytes [pos, end)
	pos := end
	for pos > limit {
		size := min(int64(tailChunk), pos-limit)
		chunk := make([]byte, size)
		if _, err := r.ReadAt(chunk, pos-size); err != nil && err != io.EOF {
			break
		}
		pos -= size
		buf = append(chunk, buf...)
		// n lines need n line breaks before them (the last line's own
		// break aside), so stop once there are n+1.
		if bytes.Count(buf, []byte{'\n'}) > n {
			break
		}
	}
	text := strings.TrimSuffix(string(buf), "\n")
	if text == "" {
		return nil
	}
	lines := strings.Split(text, "\n")
	switch {
	case len(lines) > n:
		lines = lines[len(lines)-n:]
	case pos > from:
		// The byte cap cut the first line short.
		lines[0] = "…" + lines[0]
	}
	for i, l := range lines {
		lines[i] = cleanLine(l)
	}
	return lines
}

func cleanLine(l string) string {
	l = strings.TrimSuffix(l, "\r")
	if i := strings.LastIndexByte(l, '\r'); i >= 0 {
		l = l[i+1:]
	}
	if len(l) > tailLineMax {
		cut := tailLineMax
		for cut > 0 && !utf8.RuneStart(l[cut]) {
			cut--
		}
		l = l[:cut] + "…"
	}
	// A failing step's log is shown on a terminal: its escape sequences
	// must not drive it.
	return safetext.Printable(l)
}
