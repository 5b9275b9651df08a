package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 1000)
	tests := []struct {
		name    string
		content string
		n       int
		want    []string
	}{
		{"trailing newline", "a\nb\nc\n", 2, []string{"b", "c"}},
		{"no trailing newline", "a\nb\nc", 2, []string{"b", "c"}},
		{"fewer lines than asked", "a\nb\n", 5, []string{"a", "b"}},
		{"empty file", "", 3, nil},
		{"zero lines", "a\n", 0, nil},
		{"blank lines kept", "a\n\nb\n", 3, []string{"a", "", "b"}},
		{"crlf", "a\r\nb\r\n", 2, []string{"a", "b"}},
		{"progress redraws", "start\n 10%\r 50%\r100%\ndone\n", 2, []string{"100%", "done"}},
		{"control characters dropped", "\x1b[2J\x1b]0;title\x07ok \u009b31m\x1b]8;;https://x/\x1b\\link\n", 1, []string{"[2J]0;titleok 31m]8;;https://x/\\link"}},
		{"long line cut on a rune boundary", long + "\n", 1, []string{strings.Repeat("é", tailLineMax/2) + "…"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := Tail(path, tt.n); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("Tail = %q, want %q", got, tt.want)
			}
		})
	}
	if got := Tail(filepath.Join(t.TempDir(), "missing"), 3); got != nil {
		t.Errorf("Tail of a missing file = %q", got)
	}
}

// TestTailHugeFile: a multi-gigabyte (sparse) log with the lines at its end.
func TestTailHugeFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "huge.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8 << 30); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	if _, err := f.WriteAt([]byte("\nerror: out of memory\nabort\n"), 8<<30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := Tail(path, 2); len(got) != 2 || got[0] != "error: out of memory" || got[1] != "abort" {
		t.Errorf("Tail = %q", got)
	}
}

// countingReader is an endless log of numbered lines that counts the bytes
// read from it.
type countingReader struct {
	read int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	for i := range p {
		if (off+int64(i))%10 == 9 {
			p[i] = '\n'
		} else {
			p[i] = 'x'
		}
	}
	c.read += int64(len(p))
	return len(p), nil
}

func TestTailReadsOnlyTheEnd(t *testing.T) {
	t.Parallel()
	r := &countingReader{}
	got := tailLines(r, 0, 50<<30, 5)
	if len(got) != 5 || got[4] != "xxxxxxxxx" {
		t.Errorf("tailLines = %q", got)
	}
	if r.read > tailChunk {
		t.Errorf("read %d bytes for 5 short lines", r.read)
	}

	// A log that is one endless line (progress redraws without "\n") costs
	// at most tailMaxBytes and yields its end, marked as cut.
	oneLine := &oneLineReader{}
	got = tailLines(oneLine, 0, 50<<30, 3)
	if len(got) != 1 || !strings.HasPrefix(got[0], "…") {
		t.Errorf("tailLines of one endless line = %q", got)
	}
	if oneLine.read > tailMaxBytes {
		t.Errorf("read %d bytes, cap is %d", oneLine.read, tailMaxBytes)
	}
}

type oneLineReader struct{ read int64 }

func (o *oneLineReader) ReadAt(p []byte, off int64) (int, error) {
	for i := range p {
		p[i] = 'y'
	}
	o.read += int64(len(p))
	return len(p), nil
}

func TestTailFromOffset(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log")
	content := "old 1\nold 2\n$ tool\nnew 1\n"
	os.WriteFile(path, []byte(content), 0o644)
	off := int64(strings.Index(content, "new"))
	if got := tailFrom(path, off, 5); len(got) != 1 || got[0] != "new 1" {
		t.Errorf("tailFrom = %q", got)
	}
	if got := tailFrom(path, int64(len(content)), 5); got != nil {
		t.Errorf("tailFrom at the end = %q", got)
	}
}
