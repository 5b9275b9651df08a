package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/edgepipe/edgepipe/internal/event"

	"github.com/schollz/progressbar/v3"

	"github.com/edgepipe/edgepipe/internal/proc"
	"github.com/edgepipe/edgepipe/internal/report"
)

// reporter prints run events: JSON lines with --json, a progress bar on a
// terminal, one plain line per event otherwise (no carriage returns in CI
// logs).
type reporter struct {
	env  *Env
	json bool
	// quiet prints only failures (the summary comes after the run).
	quiet bool
	bar   *progressbar.ProgressBar
	mu    sync.Mutex
	total int

	// One byte bar at a time for the transfer in progress (progressbar
	// draws a single line); off a terminal, a plain line each quarter.
	xferLabel string
	xferBar   *progressbar.ProgressBar
	xferShown int64
}

// progress shows byte progress of downloads.
func (r *reporter) progress(step, label string, done, total int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.json {
		return
	}
	if r.env.IsTerminal {
		if r.xferLabel != label || r.xferBar == nil {
			if r.bar != nil {
				r.bar.Clear()
			}
			r.xferLabel = label
			r.xferBar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(r.env.Stderr),
				progressbar.OptionSetDescription(step+": "+label), progressbar.OptionShowBytes(true),
				progressbar.OptionClearOnFinish())
		}
		r.xferBar.Set64(done)
		if total > 0 && done >= total {
			r.xferBar.Finish()
			r.xferBar = nil
		}
		return
	}
	if total <= 0 {
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

func newReporter(env *Env, asJSON bool, total int) *reporter {
	r := &reporter{env: env, json: asJSON, total: total}
	if !asJSON && env.IsTerminal {
		r.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(env.Stderr),
			progressbar.OptionSetDescription("steps"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionClearOnFinish(),
		)
	}
	return r
}

func (r *reporter) event(ev event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.json {
		b, _ := json.Marshal(ev)
		fmt.Fprintln(r.env.Stdout, string(b))
		return
	}
	if ev.Type == event.Overhead || (r.quiet && ev.Type != event.Failed && ev.Type != event.PushFailed) {
		return
	}
	line := r.line(ev)
	if r.bar != nil {
		switch ev.Type {
		case event.Finished, event.Cached, event.Failed, event.Skipped, event.Published:
			if ev.Type != event.Published || ev.Message == "" {
				r.bar.Add(1)
			}
		case event.Started:
			r.bar.Describe(ev.Step)
		}
		if ev.Type == event.Started {
			return
		}
		r.bar.Clear()
		fmt.Fprintln(r.env.Stderr, line)
		r.bar.RenderBlank()
		return
	}
	fmt.Fprintln(r.env.Stderr, line)
}

func (r *reporter) line(ev event.Event) string {
	ts := ev.Time.Format("15:04:05")
	switch ev.Type {
	case event.Started:
		return fmt.Sprintf("%s start    %s", ts, ev.Step)
	case event.Finished:
		return fmt.Sprintf("%s done     %s (%.1fs)", ts, ev.Step, ev.Seconds)
	case event.Cached:
		msg := "cached"
		if ev.Message != "" {
			msg += ", " + ev.Message
		}
		return fmt.Sprintf("%s cached   %s (%s)", ts, ev.Step, msg)
	case event.Failed:
		s := fmt.Sprintf("%s FAILED   %s: %s", ts, ev.Step, ev.Message)
		if ev.Path != "" && !strings.Contains(ev.Message, ev.Path) {
			if tail := proc.Tail(ev.Path, 12); len(tail) > 0 {
				s += "\n  last lines of " + ev.Path + ":\n    " + strings.Join(tail, "\n    ")
			} else {
				s += "\n  log: " + ev.Path
			}
		}
		return s
	case event.Skipped:
		return fmt.Sprintf("%s skipped  %s: %s", ts, ev.Step, ev.Message)
	case event.Canceled:
		return fmt.Sprintf("%s canceled %s", ts, ev.Step)
	case event.Gate:
		return fmt.Sprintf("%s gate     %s: %s", ts, ev.Target, ev.Message)
	case event.Published:
		return fmt.Sprintf("%s publish  %s -> %s", ts, ev.Target, ev.Path)
	case event.Pushed:
		return fmt.Sprintf("%s pushed   %s -> %s (%s)", ts, ev.Target, ev.Path, ev.Message)
	case event.Log:
		return fmt.Sprintf("%s note     %s: %s", ts, ev.Step, ev.Message)
	case event.PushFailed:
		return fmt.Sprintf("%s FAILED   push %s -> %s: %s", ts, ev.Target, ev.Path, ev.Message)
	}
	return fmt.Sprintf("%s %s %s %s", ts, ev.Type, ev.Step, ev.Message)
}

func (r *reporter) done() {
	if r.bar != nil {
		r.bar.Finish()
		r.bar.Clear()
	}
}

// raw prints one line that is not a step's event (the lock's status): to
// stdout as a JSON line with --json, else to stderr beside the events.
func (r *reporter) raw(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.json {
		fmt.Fprintln(r.env.Stdout, line)
		return
	}
	if r.bar != nil {
		r.bar.Clear()
		defer r.bar.RenderBlank()
	}
	fmt.Fprintln(r.env.Stderr, line)
}
