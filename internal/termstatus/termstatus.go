// Package termstatus draws a run's live status on a terminal: one line per
// running step with how long it has run and what it is doing (a
// download's progress), and a line of counts, redrawn in place below the
// run's permanent lines. A step that runs for minutes then shows its clock
// moving instead of a bar stuck at 7%. Off a terminal nothing here is
// used: CI logs get plain lines and no cursor movement.
package termstatus

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Board is the live region. Its methods are safe for concurrent use.
type Board struct {
	w     io.Writer
	width func() int
	now   func() time.Time

	mu      sync.Mutex
	total   int
	done    map[string]bool
	running []*item
	started time.Time
	// drawn is how many lines the last draw left on the screen.
	drawn  int
	closed bool
	stop   chan struct{}
	ticker sync.WaitGroup
}

type item struct {
	id     string
	start  time.Time
	detail string
}

// New returns a board for total steps writing to w; width reports the
// terminal's columns (lines are cut to fit, since a wrapped line would
// throw off the redraw), now is the clock.
func New(w io.Writer, total int, width func() int, now func() time.Time) *Board {
	if now == nil {
		now = time.Now
	}
	if width == nil {
		width = func() int { return 80 }
	}
	return &Board{w: w, width: width, now: now, total: total, done: map[string]bool{}, started: now(), stop: make(chan struct{})}
}

// Tick redraws every interval until Close, so elapsed times move while
// nothing else happens.
func (b *Board) Tick(interval time.Duration) {
	b.ticker.Add(1)
	go func() {
		defer b.ticker.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
				b.mu.Lock()
				if !b.closed {
					b.redraw()
				}
				b.mu.Unlock()
			}
		}
	}()
}

// Start shows a step as running from at.
func (b *Board) Start(id string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, it := range b.running {
		if it.id == id {
			return
		}
	}
	b.running = append(b.running, &item{id: id, start: at})
	b.redraw()
}

// Detail sets what a running step is doing ("download x 45% of 1.2 GB").
func (b *Board) Detail(id, text string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, it := range b.running {
		if it.id == id {
			if it.detail != text {
				it.detail = text
				b.redraw()
			}
			return
		}
	}
}

// Done removes a step from the running lines, counts it once and prints
// line (if any) above the live region: one redraw for both.
func (b *Board) Done(id, line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clear()
	if line != "" {
		fmt.Fprintln(b.w, line)
	}
	for i, it := range b.running {
		if it.id == id {
			b.running = append(b.running[:i], b.running[i+1:]...)
			break
		}
	}
	b.done[id] = true
	if !b.closed {
		b.draw()
	}
}

// Println prints a permanent line above the live region.
func (b *Board) Println(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clear()
	fmt.Fprintln(b.w, line)
	if !b.closed {
		b.draw()
	}
}

// Close stops the ticker and erases the live region.
func (b *Board) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	close(b.stop)
	b.clear()
	b.mu.Unlock()
	b.ticker.Wait()
}

// Lines is what the live region shows now: one line per running step, in
// the order they started, then the counts.
func (b *Board) Lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lines()
}

func (b *Board) lines() []string {
	now := b.now()
	out := make([]string, 0, len(b.running)+1)
	for _, it := range b.running {
		l := fmt.Sprintf("  %-8s %s", Elapsed(now.Sub(it.start)), it.id)
		if it.detail != "" {
			l += ": " + it.detail
		}
		out = append(out, l)
	}
	out = append(out, fmt.Sprintf("  [%d/%d] %d running, %s", len(b.done), b.total, len(b.running), Elapsed(now.Sub(b.started))))
	return out
}

func (b *Board) redraw() {
	b.clear()
	b.draw()
}

// clear moves the cursor to the start of the region and erases to the end
// of the screen.
func (b *Board) clear() {
	if b.drawn > 0 {
		fmt.Fprintf(b.w, "\x1b[%dF\x1b[J", b.drawn)
		b.drawn = 0
	}
}

func (b *Board) draw() {
	w := b.width()
	var sb strings.Builder
	lines := b.lines()
	for _, l := range lines {
		sb.WriteString(fit(l, w-1))
		sb.WriteByte('\n')
	}
	io.WriteString(b.w, sb.String())
	b.drawn = len(lines)
}

// fit cuts s to n columns (runes), marking the cut.
func fit(s string, n int) string {
	if n < 8 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Elapsed is a short clock: 4s, 1m05s, 18m02s, 1h02m.
func Elapsed(d time.Duration) string {
	s := int(d.Seconds())
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, s/60%60)
}
