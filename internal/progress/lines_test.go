package progress

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/termstatus"
)

var at = time.Date(2026, 5, 6, 7, 8, 9, 0, time.Local)

// plain is a reporter off a terminal and the stderr it writes to.
func plain(quiet bool) (*Reporter, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	r := New(Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, false, 4)
	r.Quiet = quiet
	return r, &out, &errb
}

// Off a terminal every event is one line (a failure with its log's tail),
// the same words a terminal shows, without escapes.
func TestPlainLines(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "q.log")
	if err := os.WriteFile(log, []byte(strings.Repeat("noise\n", 20)+"error: out of memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(dir, "gone.log")
	for _, tc := range []struct {
		ev   event.Event
		want string
	}{
		{event.Event{Type: event.Started, Step: "source"}, "07:08:09 start    source"},
		{event.Event{Type: event.Finished, Step: "source", Seconds: 12.345}, "07:08:09 done     source (12.3s)"},
		{event.Event{Type: event.Cached, Step: "source"}, "07:08:09 cached   source (cached)"},
		{event.Event{Type: event.Cached, Step: "source", Message: "local folder"}, "07:08:09 cached   source (cached, local folder)"},
		{event.Event{Type: event.Failed, Step: "q", Message: "exited 1", Path: log},
			"07:08:09 FAILED   q: exited 1\n  last lines of " + log + ":\n    " + strings.Repeat("noise\n    ", 11) + "error: out of memory"},
		{event.Event{Type: event.Failed, Step: "q", Message: "exited 1; see " + log, Path: log}, "07:08:09 FAILED   q: exited 1; see " + log},
		{event.Event{Type: event.Failed, Step: "q", Message: "exited 1", Path: gone}, "07:08:09 FAILED   q: exited 1\n  log: " + gone},
		{event.Event{Type: event.Failed, Step: "q", Message: "no tool"}, "07:08:09 FAILED   q: no tool"},
		{event.Event{Type: event.Skipped, Step: "publish:a", Message: "needs q"}, "07:08:09 skipped  publish:a: needs q"},
		{event.Event{Type: event.Canceled, Step: "bench"}, "07:08:09 canceled bench"},
		{event.Event{Type: event.Gate, Target: "a", Message: "ppl 10.2 vs 10.0 -> ok"}, "07:08:09 gate     a: ppl 10.2 vs 10.0 -> ok"},
		{event.Event{Type: event.Published, Target: "a", Path: "out/a"}, "07:08:09 publish  a -> out/a"},
		{event.Event{Type: event.Pushed, Target: "a", Path: "oci://r/x@sha256:1", Message: "3 layers"}, "07:08:09 pushed   a -> oci://r/x@sha256:1 (3 layers)"},
		{event.Event{Type: event.PushFailed, Target: "a", Path: "s3://b/x", Message: "403"}, "07:08:09 FAILED   push a -> s3://b/x: 403"},
		{event.Event{Type: event.Log, Step: "q", Message: "evicted a corrupt entry"}, "07:08:09 note     q: evicted a corrupt entry"},
		{event.Event{Type: "something-new", Step: "q", Message: "m"}, "07:08:09 something-new q m"},
	} {
		r, out, errb := plain(false)
		tc.ev.Time = at
		r.Event(tc.ev)
		if got := strings.TrimSuffix(errb.String(), "\n"); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.ev.Type, got, tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("%s wrote to stdout: %q", tc.ev.Type, out.String())
		}
	}
	r, _, errb := plain(false)
	r.Event(event.Event{Type: event.Overhead, Time: at, Phases: map[string]float64{"tools": 1}})
	if errb.Len() != 0 {
		t.Errorf("the overhead event is for --json only: %q", errb.String())
	}
}

// With colour, status words and a gate's verdict are painted.
func TestColouredWords(t *testing.T) {
	r := New(Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, IsTerminal: true, Getenv: func(string) string { return "" }}, false, 1)
	if !r.colour {
		t.Fatal("a terminal without NO_COLOR has no colour")
	}
	for _, tc := range []struct {
		ev   event.Event
		want string
	}{
		{event.Event{Type: event.Gate, Target: "a", Message: "ppl 12 -> fail"}, "a: ppl 12 -> " + termstatus.Paint(true, termstatus.Red, "fail")},
		{event.Event{Type: event.Finished, Step: "s"}, termstatus.Paint(true, termstatus.Green, "done")},
		{event.Event{Type: event.Skipped, Step: "s"}, termstatus.Paint(true, termstatus.Yellow, "skipped")},
		{event.Event{Type: event.Published, Target: "a"}, termstatus.Paint(true, termstatus.Green, "publish")},
	} {
		if got := r.line(tc.ev); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q lacks %q", tc.ev.Type, got, tc.want)
		}
	}
}

// -q prints failures only.
func TestQuiet(t *testing.T) {
	r, _, errb := plain(true)
	for _, typ := range []string{event.Started, event.Finished, event.Cached, event.Failed, event.Skipped, event.Gate, event.Published, event.Pushed, event.PushFailed, event.Log} {
		r.Event(event.Event{Type: typ, Step: "s", Target: "a", Time: at})
	}
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "FAILED   s:") || !strings.Contains(lines[1], "FAILED   push a") {
		t.Errorf("quiet output:\n%s", errb.String())
	}
}

// With --json every event, the overhead one included, is a JSON line on
// stdout; download progress and stderr stay silent; Raw lines go to
// stdout as they are.
func TestJSONLines(t *testing.T) {
	var out, errb bytes.Buffer
	r := New(Env{Stdout: &out, Stderr: &errb, IsTerminal: true, Getenv: func(string) string { return "" }}, true, 2)
	r.Live(false) // no live region with --json
	if !r.JSON() || r.colour || r.board != nil {
		t.Fatalf("json %v colour %v board %v", r.JSON(), r.colour, r.board != nil)
	}
	evs := []event.Event{
		{Type: event.Started, Step: "source", Time: at},
		{Type: event.Failed, Step: "source", Time: at, Message: "404"},
		{Type: event.Overhead, Time: at, Phases: map[string]float64{"hash": 0.5}},
	}
	for _, ev := range evs {
		r.Event(ev)
	}
	r.Progress("source", "download", 5, 10)
	r.Raw(`{"event":"lock","status":"matches"}`)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || lines[3] != `{"event":"lock","status":"matches"}` {
		t.Fatalf("stdout:\n%s", out.String())
	}
	for i, ev := range evs {
		var back event.Event
		if err := json.Unmarshal([]byte(lines[i]), &back); err != nil || back.Type != ev.Type || !back.Time.Equal(ev.Time) {
			t.Errorf("line %d %q: %+v, %v", i, lines[i], back, err)
		}
	}
	if errb.Len() != 0 {
		t.Errorf("stderr %q", errb.String())
	}
	if r.Summary(0) != "2 steps: 0 ran, 0 cached, 1 failed, 0 published in 0.0 s" {
		t.Errorf("summary %q: --json counts the steps too", r.Summary(0))
	}
}

func TestRawPlain(t *testing.T) {
	r, out, errb := plain(false)
	r.Raw("lock: matches")
	if errb.String() != "lock: matches\n" || out.Len() != 0 {
		t.Errorf("stderr %q stdout %q", errb.String(), out.String())
	}
}

// The summary counts each step by its last event.
func TestSummary(t *testing.T) {
	r, _, _ := plain(false)
	r.total = 7
	for _, ev := range []event.Event{
		{Type: event.Started, Step: "a"}, {Type: event.Finished, Step: "a"},
		{Type: event.Started, Step: "b"}, {Type: event.Failed, Step: "b"},
		{Type: event.Cached, Step: "c"},
		{Type: event.Skipped, Step: "d"},
		{Type: event.Canceled, Step: "e"},
		{Type: event.Started, Step: "publish:x"}, {Type: event.Published, Step: "publish:x"},
		{Type: event.Gate, Step: "publish:x"}, // not a step's end
		{Type: event.Started, Step: "f"},      // still running: not counted
		{Type: event.Log, Step: "g"},
		{Type: event.Finished}, // no step
	} {
		r.Event(ev)
	}
	if got, want := r.Summary(1), "7 steps: 2 ran, 1 cached, 1 failed, 2 not run, 1 published in 0.0 s"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	one, _, _ := plain(false)
	one.total = 1
	one.start = time.Now().Add(-42 * time.Second)
	one.Event(event.Event{Type: event.Cached, Step: "a"})
	if got, want := one.Summary(0), "1 step: 0 ran, 1 cached, 0 published in 42 s"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	one.colour = true
	one.Event(event.Event{Type: event.Failed, Step: "a"})
	if got := one.Summary(0); !strings.Contains(got, termstatus.Paint(true, termstatus.Red, "1 failed")) {
		t.Errorf("failures not painted: %q", got)
	}
}

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.0 s"},
		{400 * time.Millisecond, "0.4 s"},
		{9940 * time.Millisecond, "9.9 s"},
		{10 * time.Second, "10 s"},
		{41 * time.Second, "41 s"},
		{119 * time.Second, "119 s"},
		{120 * time.Second, "2 min 0 s"},
		{18*time.Minute + 2*time.Second, "18 min 2 s"},
		{2*time.Hour + 5*time.Second, "120 min 5 s"},
	} {
		if got := seconds(tc.d); got != tc.want {
			t.Errorf("seconds(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// Off a terminal each download gets its own quarters; downloads of
// unknown size print nothing.
func TestProgressQuarters(t *testing.T) {
	r, _, errb := plain(false)
	r.Progress("source", "a.bin", 0, 100)
	r.Progress("source", "a.bin", 60, 100)
	r.Progress("source", "a.bin", 70, 100) // still the second quarter
	r.Progress("source", "b.bin", 10, 100) // a new file starts over
	r.Progress("source", "c.bin", 10, 0)   // size unknown
	r.Progress("source", "c.bin", 10, -1)
	want := "source a.bin: 0% of 100 B\nsource a.bin: 50% of 100 B\nsource b.bin: 0% of 100 B\n"
	if errb.String() != want {
		t.Errorf("got\n%s\nwant\n%s", errb.String(), want)
	}
	// A terminal without its live region (-v) prints no progress lines.
	var tty bytes.Buffer
	r = New(Env{Stdout: &bytes.Buffer{}, Stderr: &tty, IsTerminal: true}, false, 1)
	r.Live(true)
	r.Progress("source", "a.bin", 50, 100)
	if tty.Len() != 0 || r.board != nil {
		t.Errorf("-v on a terminal: %q (board %v)", tty.String(), r.board != nil)
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 steps", 1: "1 step", 2: "2 steps"} {
		if got := plural(n); got != want {
			t.Errorf("plural(%d) = %q", n, got)
		}
	}
}
