package cli

import (
	"bytes"
	"strings"
	"testing"
)

// Off a terminal, download progress is a plain line each quarter, never a
// carriage-return bar in CI logs.
func TestProgressPlainLines(t *testing.T) {
	var errb bytes.Buffer
	r := newReporter(&Env{Stdout: &bytes.Buffer{}, Stderr: &errb}, false, 3)
	for done := int64(0); done <= 1000; done += 50 {
		r.progress("source", "download model.safetensors", done, 1000)
	}
	out := errb.String()
	if strings.Contains(out, "\r") {
		t.Errorf("carriage return in plain output: %q", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasSuffix(lines[4], "100% of 1000 B") || !strings.HasPrefix(lines[0], "source download model.safetensors: 0%") {
		t.Errorf("progress lines:\n%s", out)
	}
}
