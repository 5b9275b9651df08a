package report

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// Summary is what both reports lead with, the decision: the targets to
// ship, those that failed and why, and what to try for each. Every
// sentence is derived from the Report; where it holds too little to say
// more, the advice stays generic.
type Summary struct {
	Ship   []ShipItem
	Failed []FailedItem // the gate refused it, or a step it needs failed
	NotRun []FailedItem // fail-fast or an interruption stopped the run first
	// Other are failures no target's line names: a step no target needs
	// (its Step is set, its Target empty), a failed push, an error of the
	// run itself.
	Other []FailedItem
}

// ShipItem is a published target.
type ShipItem struct {
	Target, Format, Device string
	Size                   string // "-" when unknown
	// Verdict is the gate's (excellent, ok), "" for a format without one;
	// Measure what it was judged on ("delta +0.250, max 2.00").
	Verdict, Measure string
	// Earlier says when an earlier run published it, for a target this
	// run did not build.
	Earlier string
	// Cautions are what a reader must know before shipping it (stand-in
	// tools, a failed push); Notes what its steps observed that changes
	// what the format's name promises (fallback tensor types).
	Cautions []string
	Notes    []string
}

// FailedItem is a target that was not published, or a failure of the
// run that is no target's.
type FailedItem struct {
	Target, Format, Device string
	Step                   string // a failed step no target needs
	Why                    string
	Notes                  []string
	// Try lists what to change, most specific first.
	Try []string
}

// Summary sorts the targets into what to ship and what failed.
func (r Report) Summary() Summary {
	var s Summary
	for _, t := range r.Targets {
		switch t.Outcome {
		case OutcomePublished:
			s.Ship = append(s.Ship, shipItem(t))
		case OutcomeGateFailed, OutcomeBlocked:
			s.Failed = append(s.Failed, FailedItem{Target: t.Name, Format: t.Format, Device: t.Device,
				Why: r.why(t), Notes: keyNotes(t), Try: r.try(t)})
		default:
			s.NotRun = append(s.NotRun, FailedItem{Target: t.Name, Format: t.Format, Device: t.Device,
				Why: r.why(t), Try: r.try(t)})
		}
	}
	s.Other = r.otherFailures()
	return s
}

// HasTry reports whether any item has something to try.
func (s Summary) HasTry() bool {
	for _, items := range [][]FailedItem{s.Failed, s.NotRun, s.Other} {
		for _, it := range items {
			if len(it.Try) > 0 {
				return true
			}
		}
	}
	return false
}

// otherFailures are the run's failures that no target's line explains.
func (r Report) otherFailures() []FailedItem {
	named := map[string]bool{}
	for _, t := range r.Targets {
		for _, st := range t.FailedSteps {
			named["step "+st] = true
		}
		if t.Outcome == OutcomeGateFailed {
			named[t.Name] = true
		}
	}
	var out []FailedItem
	for _, f := range r.Failures {
		key := f.Subject
		if f.Step {
			key = "step " + f.Subject
		}
		if f.Subject != "" && named[key] {
			continue
		}
		msg, _, _ := strings.Cut(f.Message, "\n")
		msg, _, _ = strings.Cut(msg, "; last lines of its log")
		it := FailedItem{Why: msg}
		if f.Step {
			it.Step = f.Subject
			try := "read the log of " + f.Subject
			if f.LogName != "" {
				try += ": " + f.LogName
			}
			it.Try = []string{try + "; fix the cause and run again: steps that finished come from the cache"}
		} else if f.Subject != "" {
			it.Target = f.Subject
		}
		out = append(out, it)
	}
	return out
}

func shipItem(t Target) ShipItem {
	it := ShipItem{Target: t.Name, Format: t.Format, Device: t.Device, Size: "-", Verdict: t.Verdict, Measure: measure(t), Notes: keyNotes(t)}
	if t.SizeBytes > 0 {
		it.Size = HumanBytes(t.SizeBytes)
	}
	if t.Earlier {
		it.Earlier = "published by an earlier run"
		if at := earlierAt(t); at != "" {
			it.Earlier += " on " + at
		}
	}
	if len(t.StandIns) > 0 {
		it.Cautions = append(it.Cautions, fmt.Sprintf("stand-in tools ran %s: what they made or measured is not real", steps(len(t.StandIns))))
	}
	for _, p := range t.PushFailed {
		it.Cautions = append(it.Cautions, "the push to "+p+" failed")
	}
	return it
}

// measure is what a published target's verdict was judged on.
func measure(t Target) string {
	switch {
	case t.Perplexity != nil:
		p := t.Perplexity
		return fmt.Sprintf("perplexity delta %s, max %.2f", DeltaCell(p.Delta, p.DeltaCI95), p.MaxDelta)
	case t.Accuracy != nil:
		a := t.Accuracy
		return fmt.Sprintf("top-1 %.2f%%, a drop of %.2f pt, max %.2f", 100*a.Converted, 100*a.Drop, 100*a.MaxDrop)
	case t.Agreement != nil:
		a := t.Agreement
		return fmt.Sprintf("agreement %.2f%%, min %.2f%%", 100*a.Agreement, 100*a.Min)
	}
	return "no quality gate for this format"
}

// fallbackNote finds llama-quantize's fallback summary in a step's note:
// "fallbacks: 180 of 272 tensors required fallback quantization; 150 x
// q4_K->q5_0" gives its first clause.
var fallbackNote = regexp.MustCompile(`(?:^|; )fallbacks: ([^;]+)`)

// keyNotes are the notes the summary repeats: those saying the artifact
// is not uniformly the format its name says.
func keyNotes(t Target) []string {
	var out []string
	for _, n := range t.Notes {
		if m := fallbackNote.FindStringSubmatch(n.Text); m != nil {
			out = append(out, m[1]+" ("+n.Step+")")
		}
	}
	return out
}

// gate failures, in the order the summary explains them.
func pplFailed(p *Perplexity) bool {
	return p != nil && (!finite(p.Baseline) || !finite(p.Converted) || p.Delta > p.MaxDelta)
}

func accuracyFailed(a *Accuracy) bool {
	return a != nil && (math.IsNaN(a.Converted) || math.IsNaN(a.Reference) || a.Drop > a.MaxDrop+1e-12)
}

func agreementFailed(a *AgreementGate) bool {
	return a != nil && (math.IsNaN(a.Agreement) || a.Agreement < a.Min-1e-12)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// why says in one sentence why t was not published.
func (r Report) why(t Target) string {
	var why string
	switch t.Outcome {
	case OutcomeGateFailed:
		switch p, a, g := t.Perplexity, t.Accuracy, t.Agreement; {
		case pplFailed(p) && (!finite(p.Baseline) || !finite(p.Converted)):
			why = fmt.Sprintf("perplexity is not a finite number (%.4g against baseline %.4g)", p.Converted, p.Baseline)
		case pplFailed(p):
			why = fmt.Sprintf("perplexity delta %s over max_delta %.2f (%.3f against baseline %.3f)",
				DeltaCell(p.Delta, p.DeltaCI95), p.MaxDelta, p.Converted, p.Baseline)
		case accuracyFailed(a):
			why = fmt.Sprintf("top-1 drop %.2f pt over max_drop %.2f pt (%.2f%% against the reference's %.2f%%)",
				100*a.Drop, 100*a.MaxDrop, 100*a.Converted, 100*a.Reference)
		case agreementFailed(g):
			why = fmt.Sprintf("top-1 agreement with the fp32 model %.2f%% under min %.2f%%", 100*g.Agreement, 100*g.Min)
		case t.Check != "":
			why = t.Check
		case t.Error != "":
			why = t.Error
		default:
			why = "its quality gate failed"
		}
		if t.StaleFolder != "" {
			why += "; " + t.StaleFolder + " still holds an earlier run's artifact, which this run did not replace"
		}
	case OutcomeBlocked:
		var parts []string
		for _, s := range t.FailedSteps {
			msg := "step " + s + " failed"
			for _, f := range r.Failures {
				if f.Step && f.Subject == s && f.Message != "" {
					// The engine's message ends by pointing to its log's last
					// lines, which the summary's log line replaces.
					msg, _, _ = strings.Cut(f.Message, "; last lines of its log")
				}
			}
			parts = append(parts, msg)
		}
		why = strings.Join(parts, "; ")
		if why == "" {
			why = t.Error
		}
		if why == "" {
			why = "a step it needs failed"
		}
	default:
		switch {
		case t.StoppedBy != "":
			why = "not built: fail-fast stopped the run after " + t.StoppedBy + " failed"
		case r.ExitText != "" && r.ExitText != "ok":
			why = "not built: the run ended first (" + r.ExitText + ")"
		default:
			why = "not built"
		}
	}
	return why
}

// try is what to change for a target that was not published, from what
// the report holds: a target that passed on the same device, formats of
// the family with more bits, the gate's own knob, the logs.
func (r Report) try(t Target) []string {
	switch t.Outcome {
	case OutcomeGateFailed:
		return r.tryGateFailed(t)
	case OutcomeBlocked:
		if len(t.FailedSteps) == 0 {
			return []string{"read the log of the failed step; fix the cause and run again: steps that finished come from the cache"}
		}
		var out []string
		for _, s := range t.FailedSteps {
			out = append(out, "read the log of "+s+logsOf(t, s)+"; fix the cause and run again: steps that finished come from the cache")
		}
		return out
	}
	if t.StoppedBy != "" {
		return []string{"run again once " + t.StoppedBy + " is fixed, or with --keep-going to build what does not need it"}
	}
	return []string{"run again: steps that finished come from the cache"}
}

// tryGateFailed is try for a target its gate refused.
func (r Report) tryGateFailed(t Target) []string {
	var out []string
	var passed []string
	for _, o := range r.Targets {
		if o.Outcome == OutcomePublished && o.Device == t.Device && o.Name != t.Name {
			passed = append(passed, fmt.Sprintf("%s (%s)", o.Name, o.Format))
		}
	}
	if len(passed) > 0 {
		out = append(out, fmt.Sprintf("ship %s instead: %s on the same device", orList(passed), plural(len(passed), "it passed", "they passed")))
	}
	measured := pplFailed(t.Perplexity) || accuracyFailed(t.Accuracy) || agreementFailed(t.Agreement)
	if !measured {
		// A check (a budget, a decode check) refused it, not the loss.
		return append(out, "read what the check measured in the log of "+stepOr(t.CheckStep, "the step that ran it")+logsOf(t, t.CheckStep))
	}
	if len(t.StandIns) > 0 {
		out = append(out, fmt.Sprintf("stand-in tools ran %s: run it with the real tools before acting on this verdict", steps(len(t.StandIns))))
	}
	if hint := perplexityHint(t); hint != "" {
		out = append(out, hint)
	}
	if more := r.moreBits(t); len(more) > 0 {
		out = append(out, "a format with more bits per weight: "+strings.Join(more, " or "))
	}
	if f, err := catalog.ParseFormat(t.Format); err == nil && f.Family == "gguf" && f.BitsPerWeight < 5 && !f.NeedsImatrix {
		out = append(out, "an importance matrix (with: {imatrix: true}) lowers the loss of low-bit GGUF types, if the target does not use one already")
	}
	switch {
	case pplFailed(t.Perplexity):
		out = append(out, "raise quality.perplexity.max_delta for this target, if the loss is acceptable")
	case accuracyFailed(t.Accuracy):
		out = append(out, "calibrate on more, or more representative, images (data.calibration), or raise quality.accuracy.max_drop for this target if the loss is acceptable")
	case agreementFailed(t.Agreement):
		out = append(out, "calibrate on more, or more representative, images (data.calibration), or lower quality.agreement.min for this target if the change is acceptable")
	}
	return out
}

// perplexityHint reads a failed perplexity gate: undecided by its
// interval, or a broken conversion rather than rounding; "" otherwise.
func perplexityHint(t Target) string {
	p := t.Perplexity
	if !pplFailed(p) {
		return ""
	}
	model := "read the log of " + stepOr(t.RejectedStep, "the step that converted it") + logsOf(t, t.RejectedStep)
	switch {
	case finite(p.Delta) && p.DeltaCI95 != nil && p.DeltaCI95[0] <= p.MaxDelta:
		return fmt.Sprintf("the delta's 95%% interval [%+.2f, %+.2f] reaches max_delta %.2f: score more tokens "+
			"(a longer data.eval, or quality.perplexity.max_chunks: 0 to score all of it) to decide before changing the format",
			p.DeltaCI95[0], p.DeltaCI95[1], p.MaxDelta)
	case !finite(p.Converted) || !finite(p.Baseline):
		return "a perplexity that is not a number means a broken conversion, not rounding: " + model
	case p.Delta > 2:
		return "a delta over 2.0 usually means a broken conversion, not rounding: " + model
	}
	return ""
}

// moreBits names up to two formats of t's family, with at least one bit
// per weight more, that t's device runs: the one the catalog recommends
// (else the smallest) and the largest up to 8 bits. It leaves out the
// formats the report's targets for the same device have (failed or
// passed) and those that need an importance matrix.
func (r Report) moreBits(t Target) []string {
	cur, err := catalog.ParseFormat(t.Format)
	if err != nil || cur.BitsPerWeight <= 0 {
		return nil
	}
	// A format that failed on the device is no advice, and one that
	// passed there is already advised by name.
	tried := map[string]bool{}
	for _, o := range r.Targets {
		if o.Device == t.Device && (o.Outcome == OutcomeGateFailed || o.Outcome == OutcomePublished) {
			tried[o.Format] = true
		}
	}
	var cands []catalog.Format
	for _, f := range catalog.Formats() {
		if f.Family != cur.Family || f.BitsPerWeight < cur.BitsPerWeight+1 || f.BitsPerWeight > 8.6 || f.NeedsImatrix || tried[f.Name] {
			continue
		}
		if ok, _ := catalog.CanRun(t.Device, f.Name); !ok {
			continue
		}
		cands = append(cands, f)
	}
	if len(cands) == 0 {
		return nil
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].BitsPerWeight < cands[j].BitsPerWeight })
	first := cands[0]
	for _, f := range cands {
		if strings.HasPrefix(f.Note, "recommended") {
			first = f
			break
		}
	}
	label := func(f catalog.Format) string {
		return fmt.Sprintf("%s (%.2f bits per weight)", f.Name, f.BitsPerWeight)
	}
	out := []string{label(first)}
	if last := cands[len(cands)-1]; last.Name != first.Name {
		out = append(out, label(last))
	}
	return out
}

// LegendRow defines one verdict or marker the reports use.
type LegendRow struct {
	Term, Meaning string
}

// Legend defines the verdicts of the gates the run's targets have, with
// the recipe's thresholds where every target shares them, and the other
// markers the report uses.
func (r Report) Legend() []LegendRow {
	var ppl []*Perplexity
	var acc []*Accuracy
	var agr []*AgreementGate
	noGate, earlier, standIn := false, false, false
	for _, t := range r.Targets {
		if t.Perplexity != nil {
			ppl = append(ppl, t.Perplexity)
		}
		if t.Accuracy != nil {
			acc = append(acc, t.Accuracy)
		}
		if t.Agreement != nil {
			agr = append(agr, t.Agreement)
		}
		noGate = noGate || (t.Outcome == OutcomePublished && t.Verdict == "")
		earlier = earlier || t.Earlier
		standIn = standIn || len(t.StandIns) > 0
	}
	var exc, ok, fail []string
	if len(ppl) > 0 {
		warn := uniform(ppl, func(p *Perplexity) float64 { return p.WarnDelta }, "%.2f")
		max := uniform(ppl, func(p *Perplexity) float64 { return p.MaxDelta }, "%.2f")
		exc = append(exc, fmt.Sprintf("perplexity delta (converted minus baseline, on the same tokens) under warn_delta%s", warn))
		ok = append(ok, fmt.Sprintf("perplexity delta from warn_delta%s up to max_delta%s", warn, max))
		fail = append(fail, fmt.Sprintf("perplexity delta over max_delta%s, or a perplexity that is not a finite number", max))
	}
	if len(acc) > 0 {
		max := uniform(acc, func(a *Accuracy) float64 { return 100 * a.MaxDrop }, "%.2f pt")
		exc = append(exc, "top-1 accuracy no lower than the fp32 reference's (a drop of 0 or less)")
		ok = append(ok, fmt.Sprintf("a top-1 drop above 0 up to max_drop%s", max))
		fail = append(fail, fmt.Sprintf("a top-1 drop over max_drop%s", max))
	}
	if len(agr) > 0 {
		min := uniform(agr, func(a *AgreementGate) float64 { return 100 * a.Min }, "%.2f%%")
		exc = append(exc, "top-1 agreement with the fp32 model of 100% (no image changed class)")
		ok = append(ok, fmt.Sprintf("agreement from min%s up to under 100%%", min))
		fail = append(fail, fmt.Sprintf("agreement under min%s", min))
	}
	var rows []LegendRow
	if len(exc) > 0 {
		rows = append(rows,
			LegendRow{"excellent", strings.Join(exc, "; ")},
			LegendRow{"ok", strings.Join(ok, "; ")},
			LegendRow{"fail", strings.Join(fail, "; ") + ". Nothing is published for the target, and the run exits 3"})
	}
	if noGate {
		rows = append(rows, LegendRow{"published (no gate)", "the format has no quality gate: published as built, unjudged"})
	}
	if earlier {
		rows = append(rows, LegendRow{"earlier run", "this run (run --target) did not build the target; an earlier run published it, and its folder is still in the output folder"})
	}
	if standIn {
		rows = append(rows, LegendRow{"stand-in", "a step ran with a stand-in tool (tests, demos): its numbers are not measurements of the model"})
	}
	return rows
}

// uniform is " (VALUE)" when every gate has the same threshold, and
// " (per target)" when they differ.
func uniform[T any](gates []T, v func(T) float64, format string) string {
	first := fmt.Sprintf(format, v(gates[0]))
	for _, g := range gates[1:] {
		if fmt.Sprintf(format, v(g)) != first {
			return " (per target)"
		}
	}
	return " (" + first + ")"
}

// PublishedLine is the report's first sentence: how many targets were
// published, by this run and still from an earlier one, and the exit.
func (r Report) PublishedLine() string {
	earlier, this := 0, 0
	for _, t := range r.Targets {
		if t.Earlier {
			earlier++
		} else {
			this++
		}
	}
	if earlier == 0 {
		return fmt.Sprintf("%d of %d targets published; exit code %d (%s).", r.Published, this, r.ExitCode, r.ExitText)
	}
	return fmt.Sprintf("%d of %d targets this run built published, and %d published by an earlier run %s still in the output folder; exit code %d (%s).",
		r.Published, this, earlier, plural(earlier, "is", "are"), r.ExitCode, r.ExitText)
}

// stepOr is step, or other when there is none.
func stepOr(step, other string) string {
	if step == "" {
		return other
	}
	return step
}

// logsOf is ": PATH" for step's log, "" when t has none for it.
func logsOf(t Target, step string) string {
	for _, l := range t.StepLogs {
		if l.Step == step && step != "" {
			return ": " + l.Path
		}
	}
	return ""
}

// steps is "1 of its steps", "6 of its steps".
func steps(n int) string {
	return fmt.Sprintf("%d of its steps", n)
}

// orList is "a", "a or b", "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
