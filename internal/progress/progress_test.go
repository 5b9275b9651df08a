package progress

import (
	"time"

	"bytes"
	"encoding/json"
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

// fakeClock advances by step on each read.
func fakeClock(step time.Duration) func() time.Time {
	t := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(step); return t }
}

// A tool's own progress: off a terminal a plain line each quarter with
// the time left at its rate, no carriage returns; a new tool in the same
// step starts its own clock.
func TestToolProgressPlainLines(t *testing.T) {
	var errb bytes.Buffer
	r := New(Env{Stdout: &bytes.Buffer{}, Stderr: &errb}, false, 3)
	r.now = fakeClock(time.Second)
	for done := int64(1); done <= 272; done++ {
		r.ToolProgress("gguf-quantize:q4_k_m", "llama-quantize", done, 272)
	}
	r.ToolProgress("gguf-quantize:q4_k_m", "llama-quantize", 272, 272) // repeated: nothing new
	out := errb.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if strings.Contains(out, "\r") || len(lines) != 4 {
		t.Fatalf("lines:\n%s", out)
	}
	// 68 of 272 after 67 s at one a second: 204 left, about 3m24s.
	if lines[0] != "gguf-quantize:q4_k_m llama-quantize: 25% (68/272), about 3m24s left" || lines[3] != "gguf-quantize:q4_k_m llama-quantize: 100% (272/272)" {
		t.Errorf("lines:\n%s", out)
	}
	errb.Reset()
	r.ToolProgress("gguf-quantize:q4_k_m", "llama-perplexity", 8, 16)
	if !strings.HasPrefix(errb.String(), "gguf-quantize:q4_k_m llama-perplexity: 50% (8/16)\n") {
		t.Errorf("a second tool: %q", errb.String())
	}
}

// With --json, a progress event each tenth (or five seconds), carrying
// done, total and the time left; the last always.
func TestToolProgressJSON(t *testing.T) {
	var outb bytes.Buffer
	r := New(Env{Stdout: &outb, Stderr: &bytes.Buffer{}}, true, 3)
	r.now = fakeClock(100 * time.Millisecond)
	for done := int64(1); done <= 100; done++ {
		r.ToolProgress("perplexity:q8_0", "llama-perplexity", done, 100)
	}
	var evs []event.Event
	for _, l := range strings.Split(strings.TrimSpace(outb.String()), "\n") {
		var ev event.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		evs = append(evs, ev)
	}
	last := evs[len(evs)-1]
	if len(evs) != 11 || evs[0].Type != event.Progress || evs[0].Message != "llama-perplexity" || last.Done != 100 || last.Total != 100 {
		t.Fatalf("%d events: %+v .. %+v", len(evs), evs[0], last)
	}
	// At 50 of 100 after 4.9 s (49 more at 0.1 s each): 50 left, about 5 s.
	for _, ev := range evs {
		if ev.Done == 50 && (ev.ETASeconds < 4.9 || ev.ETASeconds > 5.2) {
			t.Errorf("eta at 50: %v", ev.ETASeconds)
		}
	}
	if !strings.Contains(outb.String(), `"eta_seconds":`) {
		t.Error("no eta_seconds field")
	}
}

// On a terminal the step's live line carries it.
func TestToolProgressLiveLine(t *testing.T) {
	var errb bytes.Buffer
	r := New(Env{Stdout: &bytes.Buffer{}, Stderr: &errb, IsTerminal: true, Getenv: func(string) string { return "" }}, false, 1)
	r.now = fakeClock(time.Second)
	r.Live(false)
	r.Event(event.Event{Type: event.Started, Step: "gguf-quantize:q4_k_m", Time: time.Now()})
	r.ToolProgress("gguf-quantize:q4_k_m", "llama-quantize", 1, 272)
	r.ToolProgress("gguf-quantize:q4_k_m", "llama-quantize", 136, 272)
	r.Done()
	if !strings.Contains(errb.String(), "llama-quantize 136/272 (50%), about 1s left") {
		t.Errorf("live region:\n%q", errb.String())
	}
}
