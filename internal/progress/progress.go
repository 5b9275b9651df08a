// Package progress is what a command prints while it runs: the run's
// events as JSON lines (--json), as plain lines (off a terminal: no
// carriage returns or cursor movement in CI logs), or on a terminal as
// coloured permanent lines with a live region below them; and the run's
// one-line summary.
package progress

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/edgepipe/edgepipe/internal/event"

	"github.com/edgepipe/edgepipe/internal/proc"
	"github.com/edgepipe/edgepipe/internal/report"
	"github.com/edgepipe/edgepipe/internal/termstatus"

	"github.com/edgepipe/edgepipe/internal/safetext"
)

// reporter prints run events: JSON lines with --json; on a terminal, the
// permanent lines with a live region below them (one line per running
// step with its elapsed time, and the counts); one plain line per event
// otherwise (no carriage returns or cursor movement in CI logs). It also
// counts what happened to each step for the run's one-line summary.
type Reporter struct {
	env  Env
	json bool
	// Quiet prints only failures (the summary comes after the run).
	Quiet bool
	board *termstatus.Board
	// colour paints status words and verdicts (a terminal, no NO_COLOR).
	colour bool
	mu     sync.Mutex
	total  int
	start  time.Time
	// state is each step's last event type, for the summary.
	state map[string]string

	// Off a terminal, a download's progress is a plain line each quarter.
	xferLabel string
	xferShown int64
	// tools is each running step's tool progress, for its ETA.
	tools map[string]*toolClock
	// now is the clock (tests set it).
	now func() time.Time
}

// toolClock follows one step's tool progress.
type toolClock struct {
	tool      string
	start     time.Time
	startDone int64
	lastDone  int64
	// what was last shown: off a terminal the quarter, in --json the
	// time and the tenth.
	quarter  int64
	jsonAt   time.Time
	jsonTens int64
}

// ToolProgress shows how far a step's tool is (done of total, in its own
// units) with the time left at its rate so far: on a terminal in the
// step's live line; off one, a plain line each quarter (no carriage
// returns); with --json, a progress event each tenth or five seconds.
func (r *Reporter) ToolProgress(step, tool string, done, total int64) {
	if total <= 0 || done < 0 || done > total {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock()
	c := r.tools[step]
	if c == nil || c.tool != tool || done < c.lastDone {
		// A step may run several tools, or the same one twice.
		c = &toolClock{tool: tool, start: now, startDone: done, quarter: -1, jsonTens: -1}
		if r.tools == nil {
			r.tools = map[string]*toolClock{}
		}
		r.tools[step] = c
	}
	c.lastDone = done
	eta := -1.0
	if elapsed := now.Sub(c.start).Seconds(); elapsed >= 1 && done > c.startDone {
		eta = float64(total-done) / (float64(done-c.startDone) / elapsed)
	}
	pct := done * 100 / total
	switch {
	case r.json:
		tens := done * 10 / total
		if tens == c.jsonTens && now.Sub(c.jsonAt) < 5*time.Second && done != total {
			return
		}
		c.jsonTens, c.jsonAt = tens, now
		ev := event.Event{Time: now, Type: event.Progress, Step: step, Message: tool, Done: done, Total: total}
		if eta >= 0 {
			ev.ETASeconds = float64(int64(eta*10+0.5)) / 10
		}
		b, _ := json.Marshal(ev)
		fmt.Fprintln(r.env.Stdout, string(b))
	case r.board != nil:
		r.board.Detail(step, fmt.Sprintf("%s %d/%d (%d%%)%s", tool, done, total, pct, etaText(eta)))
	case !r.env.IsTerminal && !r.Quiet:
		quarter := done * 4 / total
		if quarter <= c.quarter || quarter == 0 {
			return
		}
		c.quarter = quarter
		fmt.Fprintf(r.env.Stderr, "%s %s: %d%% (%d/%d)%s\n", safetext.Printable(step), safetext.Printable(tool), pct, done, total, etaText(eta))
	}
}

// etaText is ", about 12s left", or "" while the rate is unknown (eta
// < 0) or nothing is left.
func etaText(eta float64) string {
	if eta < 0.5 {
		return ""
	}
	return ", about " + (time.Duration(eta+0.5) * time.Second).String() + " left"
}

func (r *Reporter) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// Progress shows byte progress of downloads.
func (r *Reporter) Progress(step, label string, done, total int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.json {
		return
	}
	if r.board != nil {
		detail := fmt.Sprintf("%s %s", label, report.HumanBytes(done))
		if total > 0 {
			detail = fmt.Sprintf("%s %d%% of %s", label, done*100/total, report.HumanBytes(total))
		}
		r.board.Detail(step, detail)
		return
	}
	if total <= 0 || r.env.IsTerminal {
		return
	}
	quarter := done * 4 / total
	if r.xferLabel != label {
		r.xferLabel, r.xferShown = label, -1
	}
	if quarter > r.xferShown {
		r.xferShown = quarter
		fmt.Fprintf(r.env.Stderr, "%s %s: %d%% of %s\n", step, label, quarter*25, report.HumanBytes(total))
	}
}

// Env is what the reporter writes to and knows of the terminal.
type Env struct {
	Stdout, Stderr io.Writer
	// IsTerminal: Stderr is a terminal (live lines, colour).
	IsTerminal bool
	Getenv     func(string) string
	// Width is the terminal's columns (nil: 80).
	Width func() int
}

// New returns a reporter for a run of total steps; asJSON prints JSON
// lines on Stdout.
func New(env Env, asJSON bool, total int) *Reporter {
	r := &Reporter{env: env, json: asJSON, total: total, start: time.Now(), state: map[string]string{}}
	r.colour = !asJSON && env.Getenv != nil && termstatus.ColourOn(env.IsTerminal, env.Getenv)
	return r
}

// Live starts the terminal's live region (not with --json, -q, -v, whose
// tool output would interleave with the redraws, or off a terminal).
func (r *Reporter) Live(verbose bool) {
	if r.json || r.Quiet || verbose || !r.env.IsTerminal {
		return
	}
	r.board = termstatus.New(r.env.Stderr, r.total, r.env.Width, nil)
	r.board.Tick(time.Second)
}

func (r *Reporter) Event(ev event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Step != "" {
		switch ev.Type {
		case event.Finished, event.Cached, event.Failed, event.Skipped, event.Canceled, event.Published, event.Started:
			r.state[ev.Step] = ev.Type
			delete(r.tools, ev.Step)
		}
	}
	if r.json {
		b, _ := json.Marshal(ev)
		fmt.Fprintln(r.env.Stdout, string(b))
		return
	}
	if ev.Type == event.Overhead || (r.Quiet && ev.Type != event.Failed && ev.Type != event.PushFailed) {
		return
	}
	// A failed step's message carries its tool's words (and the log's
	// tail): neutralised before they reach the terminal.
	for _, f := range []*string{&ev.Step, &ev.Target, &ev.Path, &ev.Message} {
		*f = safetext.Printable(*f)
	}
	if r.board == nil {
		fmt.Fprintln(r.env.Stderr, r.line(ev))
		return
	}
	switch ev.Type {
	case event.Started:
		// The live region shows it, with its clock.
		r.board.Start(ev.Step, ev.Time)
		return
	case event.Finished, event.Cached, event.Failed, event.Skipped, event.Canceled, event.Published:
		r.board.Done(ev.Step, r.line(ev))
		return
	}
	r.board.Println(r.line(ev))
}

// Summary is the run's one line: how many steps ran, came from the cache,
// failed or did not run, how many targets were published, and how long
// it took.
func (r *Reporter) Summary(published int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ran, cached, failed, notRun int
	for _, st := range r.state {
		switch st {
		case event.Finished, event.Published:
			ran++
		case event.Cached:
			cached++
		case event.Failed:
			failed++
		case event.Skipped, event.Canceled:
			notRun++
		}
	}
	parts := []string{fmt.Sprintf("%d ran", ran), fmt.Sprintf("%d cached", cached)}
	if failed > 0 {
		parts = append(parts, termstatus.Paint(r.colour, termstatus.Red, fmt.Sprintf("%d failed", failed)))
	}
	if notRun > 0 {
		parts = append(parts, fmt.Sprintf("%d not run", notRun))
	}
	parts = append(parts, fmt.Sprintf("%d published", published))
	return fmt.Sprintf("%s: %s in %s", plural(r.total), strings.Join(parts, ", "), seconds(time.Since(r.start)))
}

// seconds is a duration for the summary: "0.4 s", "41 s", "18 min 2 s".
func seconds(d time.Duration) string {
	switch s := d.Seconds(); {
	case s < 10:
		return fmt.Sprintf("%.1f s", s)
	case s < 120:
		return fmt.Sprintf("%.0f s", s)
	default:
		return fmt.Sprintf("%d min %d s", int(s)/60, int(s)%60)
	}
}

// word paints a status word for the terminal.
func (r *Reporter) word(w string) string {
	return termstatus.Paint(r.colour, termstatus.VerdictColour(strings.TrimSpace(w)), w)
}

func (r *Reporter) line(ev event.Event) string {
	ts := ev.Time.Format("15:04:05")
	switch ev.Type {
	case event.Started:
		return fmt.Sprintf("%s start    %s", ts, ev.Step)
	case event.Finished:
		return fmt.Sprintf("%s %s     %s (%.1fs)", ts, r.word("done"), ev.Step, ev.Seconds)
	case event.Cached:
		msg := "cached"
		if ev.Message != "" {
			msg += ", " + ev.Message
		}
		return fmt.Sprintf("%s cached   %s (%s)", ts, ev.Step, msg)
	case event.Failed:
		s := fmt.Sprintf("%s %s   %s: %s", ts, r.word("FAILED"), ev.Step, ev.Message)
		if ev.Path != "" && !strings.Contains(ev.Message, ev.Path) {
			if tail := proc.Tail(ev.Path, 12); len(tail) > 0 {
				s += "\n  last lines of " + ev.Path + ":\n    " + strings.Join(tail, "\n    ")
			} else {
				s += "\n  log: " + ev.Path
			}
		}
		return s
	case event.Skipped:
		return fmt.Sprintf("%s %s  %s: %s", ts, r.word("skipped"), ev.Step, ev.Message)
	case event.Canceled:
		return fmt.Sprintf("%s %s %s", ts, r.word("canceled"), ev.Step)
	case event.Gate:
		msg := ev.Message
		if head, v, ok := strings.Cut(msg, "-> "); ok && r.colour {
			msg = head + "-> " + r.word(v)
		}
		return fmt.Sprintf("%s gate     %s: %s", ts, ev.Target, msg)
	case event.Published:
		return fmt.Sprintf("%s %s  %s -> %s", ts, r.word("publish"), ev.Target, ev.Path)
	case event.Pushed:
		return fmt.Sprintf("%s pushed   %s -> %s (%s)", ts, ev.Target, ev.Path, ev.Message)
	case event.Log:
		return fmt.Sprintf("%s note     %s: %s", ts, ev.Step, ev.Message)
	case event.PushFailed:
		return fmt.Sprintf("%s %s   push %s -> %s: %s", ts, r.word("FAILED"), ev.Target, ev.Path, ev.Message)
	}
	return fmt.Sprintf("%s %s %s %s", ts, ev.Type, ev.Step, ev.Message)
}

// JSON says whether the reporter prints JSON lines.
func (r *Reporter) JSON() bool { return r.json }

// Done erases the live region; call it before printing after the run.
func (r *Reporter) Done() {
	if r.board != nil {
		r.board.Close()
	}
}

// Raw prints one line that is not a step's event (the lock's status): to
// stdout as a JSON line with --json, else to stderr beside the events.
func (r *Reporter) Raw(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.json {
		fmt.Fprintln(r.env.Stdout, line)
		return
	}
	if r.board != nil {
		r.board.Println(line)
		return
	}
	fmt.Fprintln(r.env.Stderr, line)
}

// plural is "1 step", "2 steps".
func plural(n int) string {
	if n == 1 {
		return "1 step"
	}
	return fmt.Sprintf("%d steps", n)
}
