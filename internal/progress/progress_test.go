package progress

import (
	"time"

	"bytes"
	"github.com/edgepipe/edgepipe/internal/event"
	"strings"
	"testing"
)

// Off a terminal, download progress is a plain line each quarter, never a
// carriage-return bar in CI logs.
func TestProgressPlainLines(t *testing.T) {
	var errb bytes.Buffer
	r := New(Env{Stdout: &bytes.Buffer{}, Stderr: &errb}, false, 3)
	for done := int64(0); done <= 1000; done += 50 {
		r.Progress("source", "download model.safetensors", done, 1000)
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

// On a terminal, a running step is a live line (not a permanent "start"
// line) and verdict words are coloured; NO_COLOR keeps the live lines and
// drops the colour; off a terminal the lines are plain, with no escapes.
// A failed step's message never brings its own.
func TestReporterTerminal(t *testing.T) {
	run := func(isTerm bool, env map[string]string) string {
		var errb bytes.Buffer
		r := New(Env{Stdout: &bytes.Buffer{}, Stderr: &errb, IsTerminal: isTerm,
			Getenv: func(k string) string { return env[k] }}, false, 2)
		r.Live(false)
		now := time.Now()
		r.Event(event.Event{Type: event.Started, Step: "gguf-convert:f16", Time: now})
		r.Event(event.Event{Type: event.Finished, Step: "gguf-convert:f16", Time: now, Seconds: 1})
		// A tool's words with a window title and a screen clear in them.
		r.Event(event.Event{Type: event.Failed, Step: "gguf-quantize:q2_k", Time: now, Message: "boom\x1b]0;title\x07\x1b[2J"})
		r.Done()
		if s := r.Summary(0); s != "2 steps: 1 ran, 0 cached, 1 failed, 0 published in 0.0 s" && !isTerm {
			t.Errorf("summary %q", s)
		}
		return errb.String()
	}
	tty := run(true, nil)
	if !strings.Contains(tty, "gguf-convert:f16\n  [0/2] 1 running") || !strings.Contains(tty, "\x1b[31mFAILED\x1b[0m") {
		t.Errorf("terminal output:\n%q", tty)
	}
	if strings.Contains(tty, "\x1b]") || strings.Contains(tty, "\x07") || strings.Contains(tty, "\x1b[2J") || !strings.Contains(tty, "boom]0;title[2J") {
		t.Errorf("the tool's escapes reached the terminal:\n%q", tty)
	}
	if strings.Contains(tty, " start ") {
		t.Errorf("a permanent start line on a terminal:\n%q", tty)
	}
	noColour := run(true, map[string]string{"NO_COLOR": "1"})
	if strings.Contains(noColour, "\x1b[31m") || !strings.Contains(noColour, "[0/2] 1 running") {
		t.Errorf("NO_COLOR output:\n%q", noColour)
	}
	plain := run(false, nil)
	if strings.Contains(plain, "\x1b") || !strings.Contains(plain, " start    gguf-convert:f16\n") {
		t.Errorf("plain output:\n%q", plain)
	}
}
