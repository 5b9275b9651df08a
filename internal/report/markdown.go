package report

import (
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/internal/safetext"
)

// Markdown renders the report for a GitHub job summary
// ($GITHUB_STEP_SUMMARY) and report.md: the per-target table, quality and
// speed details, the decode ceilings, and each failure's root cause. Text
// from recipes and tool logs is escaped so it cannot break the tables or
// inject markup.
// MarkdownHeading starts every Markdown report, and HTMLTitle is in the
// head of every HTML one: how a report file edgepipe wrote is told from
// one it must not replace.
const (
	MarkdownHeading = "## edgepipe run: "
	HTMLTitle       = "<title>edgepipe run: "
)

func Markdown(r Report) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s\n\n", MarkdownHeading, MDText(r.Recipe))
	fmt.Fprintf(&b, "%s\n\n", MDText(r.PublishedLine()))
	if line := r.RunLine(); line != "" {
		fmt.Fprintf(&b, "%s.\n\n", MDText(line))
	}
	summary(&b, r)
	legend(&b, r)
	b.WriteString("### Targets\n\n")
	b.WriteString("| Target | Format | Device | Size | PPL | Delta | Verdict | Artifact |\n")
	b.WriteString("| --- | --- | --- | ---: | ---: | ---: | --- | --- |\n")
	for _, t := range r.Targets {
		size, ppl, delta, verdict, where := "-", "-", "-", "-", "-"
		if t.SizeBytes > 0 {
			size = HumanBytes(t.SizeBytes)
		}
		if p := t.Perplexity; p != nil {
			ppl = fmt.Sprintf("%.3f", p.Converted)
			delta = DeltaCell(p.Delta, p.DeltaCI95)
		}
		if a := t.Accuracy; a != nil {
			ppl = fmt.Sprintf("top-1 %.2f%%", 100*a.Converted)
			delta = fmt.Sprintf("drop %.2f pt", 100*a.Drop)
		} else if a := t.Agreement; a != nil {
			ppl = fmt.Sprintf("agreement %.2f%%", 100*a.Agreement)
			delta = fmt.Sprintf("min %.2f%%", 100*a.Min)
		}
		if t.Verdict != "" {
			verdict = t.Verdict
		}
		switch t.Outcome {
		case OutcomePublished:
			where = "`" + MDCode(t.Artifact) + "`"
			for _, p := range t.Pushed {
				where += ", `" + MDCode(p) + "`"
			}
			for _, p := range t.PushFailed {
				where += ", **push to `" + MDCode(p) + "` failed**"
			}
			if t.Verdict == "" {
				verdict = "published (no gate)"
			}
			if t.Earlier {
				where += " (earlier run"
				if at := earlierAt(t); at != "" {
					where += ", " + at
				}
				where += ")"
			}
		case OutcomeGateFailed:
			verdict, where = "**"+verdict+"**", "not published (gate failed)"
		case OutcomeBlocked:
			where = "not published (upstream failed)"
		case OutcomeNotRun:
			where = "not published"
			if t.StoppedBy != "" {
				where = "not run (stopped after `" + MDCode(t.StoppedBy) + "` failed)"
			}
		default:
			where = "not published"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s | %s | %s | %s |\n",
			MDText(t.Name), MDCode(t.Format), MDText(t.Device), size, ppl, delta, verdict, where)
	}
	decision(&b, r)
	quality(&b, r)
	ceilings(&b, r)
	details(&b, r)
	if len(r.Failures) > 0 {
		b.WriteString("\n### Failures\n\n")
		for _, f := range r.Failures {
			switch {
			case f.Subject == "":
				fmt.Fprintf(&b, "- %s\n", MDText(f.Message))
			case f.Step:
				fmt.Fprintf(&b, "- **step %s**: %s\n", MDText(f.Subject), MDText(f.Message))
			default:
				fmt.Fprintf(&b, "- **%s**: %s\n", MDText(f.Subject), MDText(f.Message))
			}
			if len(f.LogTail) > 0 {
				// A block the page shows line by line, folded.
				fmt.Fprintf(&b, "  <details><summary>last lines of %s</summary>\n\n  ```text\n", MDText(f.LogName))
				for _, l := range f.LogTail {
					fmt.Fprintf(&b, "  %s\n", strings.ReplaceAll(printable(l), "```", "'''"))
				}
				b.WriteString("  ```\n  </details>\n")
			}
		}
	}
	b.WriteString("\n")
	return []byte(b.String())
}

// summary leads the report with the decision: what to ship, what failed
// and why, and what to try.
func summary(b *strings.Builder, r Report) {
	s := r.Summary()
	b.WriteString("### Summary\n\n")
	if len(s.Ship) == 0 {
		b.WriteString("**Ship:** nothing: no target was published.\n\n")
	} else {
		b.WriteString("**Ship:**\n\n")
		for _, it := range s.Ship {
			verdict := it.Verdict
			if verdict == "" {
				verdict = "published (no gate)"
			}
			line := fmt.Sprintf("**%s**: `%s` on %s, %s, %s (%s)", MDText(it.Target), MDCode(it.Format), MDText(it.Device), it.Size, verdict, MDText(it.Measure))
			if it.Earlier != "" {
				line += "; _" + MDText(it.Earlier) + "_"
			}
			for _, n := range it.Notes {
				line += "; " + MDText(n)
			}
			for _, c := range it.Cautions {
				line += "; **" + MDText(c) + "**"
			}
			b.WriteString("- " + line + "\n")
		}
		b.WriteString("\n")
	}
	item := func(it FailedItem, bold bool) {
		why := MDText(it.Why)
		if bold {
			why = "**" + why + "**"
		}
		line := fmt.Sprintf("- **%s** (`%s` on %s): %s", MDText(it.Target), MDCode(it.Format), MDText(it.Device), why)
		for _, n := range it.Notes {
			line += "; " + MDText(n)
		}
		b.WriteString(line + "\n")
	}
	if len(s.Failed)+len(s.Other) > 0 {
		b.WriteString("**Failed:**\n\n")
		for _, it := range s.Failed {
			item(it, true)
		}
		for _, it := range s.Other {
			switch {
			case it.Step != "":
				fmt.Fprintf(b, "- **step %s**: **%s**\n", MDText(it.Step), MDText(it.Why))
			case it.Target != "":
				fmt.Fprintf(b, "- **%s**: **%s**\n", MDText(it.Target), MDText(it.Why))
			default:
				fmt.Fprintf(b, "- **%s**\n", MDText(it.Why))
			}
		}
		b.WriteString("\n")
	}
	if len(s.NotRun) > 0 {
		b.WriteString("**Not built:**\n\n")
		for _, it := range s.NotRun {
			item(it, false)
		}
		b.WriteString("\n")
	}
	if s.HasTry() {
		b.WriteString("**What to try:**\n\n")
		for _, it := range append(append(append([]FailedItem(nil), s.Failed...), s.NotRun...), s.Other...) {
			if len(it.Try) == 0 {
				continue
			}
			name := it.Target
			if it.Step != "" {
				name = "step " + it.Step
			}
			fmt.Fprintf(b, "- **%s**:\n", MDText(name))
			for _, t := range it.Try {
				fmt.Fprintf(b, "  - %s\n", MDText(t))
			}
		}
		b.WriteString("\n")
	}
	if r.SourceNote != "" {
		b.WriteString(MDText(r.SourceNote) + "\n\n")
	}
}

// legend defines the verdicts and markers the report uses.
func legend(b *strings.Builder, r Report) {
	rows := r.Legend()
	if len(rows) == 0 {
		return
	}
	b.WriteString("| Legend | Meaning |\n| --- | --- |\n")
	for _, l := range rows {
		fmt.Fprintf(b, "| %s | %s |\n", MDText(l.Term), MDText(l.Meaning))
	}
	b.WriteString("\n")
}

// details lists, per target, what the tables have no room for: an
// earlier run's date, a rejected model and its logs, the steps' notes.
func details(b *strings.Builder, r Report) {
	any := false
	for _, t := range r.Targets {
		if t.Earlier || t.Rejected != "" || len(t.StepLogs) > 0 || len(t.Notes) > 0 {
			if !any {
				b.WriteString("\n### Target details\n")
				any = true
			}
			fmt.Fprintf(b, "\n**%s** (`%s` on %s)\n\n", MDText(t.Name), MDCode(t.Format), MDText(t.Device))
			if t.Earlier {
				at := earlierAt(t)
				if at != "" {
					at = " on " + at
				}
				fmt.Fprintf(b, "- published by an earlier run%s; this run did not build it, and its folder is still in the output folder\n", at)
			}
			if t.Rejected != "" {
				size := ""
				if t.SizeBytes > 0 {
					size = " (" + HumanBytes(t.SizeBytes) + ")"
				}
				fmt.Fprintf(b, "- rejected model%s, kept in the cache: `%s`\n", size, MDCode(t.Rejected))
			}
			if len(t.StepLogs) > 0 {
				b.WriteString("- logs:\n")
				for _, l := range t.StepLogs {
					fmt.Fprintf(b, "  - `%s`: `%s`\n", MDCode(l.Step), MDCode(l.Path))
				}
			}
			if len(t.Notes) > 0 {
				b.WriteString("- notes from the steps:\n")
				for _, n := range t.Notes {
					fmt.Fprintf(b, "  - `%s`: %s\n", MDCode(n.Step), MDText(n.Text))
				}
			}
		}
	}
}

// decision is the decision table of an image-classification run whose
// targets were benched.
func decision(b *strings.Builder, r Report) {
	rows := r.Decision()
	if rows == nil {
		return
	}
	b.WriteString("\n### Decision table\n\n")
	b.WriteString(MDText(decisionNote(rows, r)) + "\n\n")
	b.WriteString("| Target | Format | Runtime | Size | Top-1 (or agreement) | Drop | p50 ms | p95 ms | p99 ms | Images/s | Peak RSS | RSS growth | Verdict |\n")
	b.WriteString("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, d := range rows {
		name, verdict := MDText(d.Target), MDText(d.Verdict)
		if d.StandIn {
			name += " (stand-in)"
		}
		if d.Failed {
			verdict = "**" + verdict + "**"
		}
		fmt.Fprintf(b, "| %s | `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, MDCode(d.Format), MDText(d.Runtime),
			d.Size, d.Quality, MDText(d.Drop), d.P50, d.P95, d.P99, d.Throughput, d.PeakRSS, d.Growth, verdict)
	}
}

// quality is the table of what the main one has no room for: KL
// divergence and top-1 agreement, the bench, and stand-in markers. It is
// left out when no target has any of them.
func quality(b *strings.Builder, r Report) {
	any := false
	for _, t := range r.Targets {
		if t.KLDivergence != nil || t.Top1Agreement != nil || t.Generation != nil || t.Bench != nil || len(t.StandIns) > 0 {
			any = true
		}
	}
	if !any {
		return
	}
	b.WriteString("\n### Quality and speed\n\n")
	b.WriteString("Decode: one token at a time with the prompt already in the KV cache; first token: the prompt's forward pass (median); on this host.\n\n")
	gen, genSep := "", ""
	if r.anyGeneration() {
		b.WriteString("Generation: the share of the original model's greedy tokens the artifact, decoding through its KV cache, agreed with, and the mean KL divergence from the original.\n\n")
		gen, genSep = " Generation |", " ---: |"
	}
	b.WriteString("| Target | KL divergence | Top-1 agreement |" + gen + " Decode tok/s | Token p50 / p95 / p99 ms | First token ms | Prompt tok/s | Host ceiling | Tools |\n")
	b.WriteString("| --- | ---: | ---: |" + genSep + " ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, t := range r.Targets {
		kl, top1, dec, lat, ftt, pr, ceil := "-", "-", "-", "-", "-", "-", "-"
		if t.KLDivergence != nil {
			kl = fmt.Sprintf("%.4f", *t.KLDivergence)
		}
		if t.Top1Agreement != nil {
			top1 = Agreement(*t.Top1Agreement)
		}
		if bn := t.Bench; bn != nil {
			dec = tokS(bn.DecodeTokS)
			lat = fmt.Sprintf("%.2f / %.2f / %.2f", bn.TokenP50MS, bn.TokenP95MS, bn.TokenP99MS)
			ftt = fmt.Sprintf("%.1f (%d tokens)", bn.FirstTokenMS, bn.PromptTokens)
			pr = tokS(bn.PromptTokS)
			if bn.HostCeilingTokS != nil && bn.HostBandwidthGBs != nil {
				ceil = fmt.Sprintf("%s tok/s at %.2f GB/s", tokS(*bn.HostCeilingTokS), *bn.HostBandwidthGBs)
				if bn.Efficiency != nil {
					ceil += fmt.Sprintf(" (efficiency %s)", percent(*bn.Efficiency))
				}
			}
		}
		genCell := ""
		if gen != "" {
			genCell = " " + GenerationCell(t.Generation) + " |"
		}
		fmt.Fprintf(b, "| %s | %s | %s |%s %s | %s | %s | %s | %s | %s |\n",
			MDText(t.Name), kl, top1, genCell, dec, lat, ftt, pr, ceil, MDText(tools(t)))
	}
}

// tools says whether a target's numbers came from real tools.
func tools(t Target) string {
	if len(t.StandIns) == 0 {
		if t.Outcome == OutcomeBlocked || t.Outcome == OutcomeNotRun {
			return "-"
		}
		return "real"
	}
	return "stand-in: " + strings.Join(t.StandIns, ", ")
}

// ceilings is one table for every published target: rows are this host
// and the devices of the run's targets, cells each target's ceiling there.
func ceilings(b *strings.Builder, r Report) {
	var ts []Target
	var rows [][]Ceiling
	for _, t := range r.Targets {
		if c := r.Ceilings(t); c != nil {
			ts = append(ts, t)
			rows = append(rows, c)
		}
	}
	if len(ts) == 0 {
		return
	}
	b.WriteString("\n### Decode ceilings (tok/s)\n\n")
	b.WriteString("Memory bandwidth / artifact size: the bandwidth-bound upper limit on decode speed, since every token reads every weight once. On this host, beside what the bench measured.\n\n")
	b.WriteString("| Device | GB/s |")
	sep := "| --- | ---: |"
	for _, t := range ts {
		fmt.Fprintf(b, " %s (%s) |", MDText(t.Name), HumanBytes(t.SizeBytes))
		sep += " ---: |"
	}
	b.WriteString("\n" + sep + "\n")

	// The host row: each target's own bench (bandwidth is probed beside
	// each), "-" where a target was not benched.
	var hostCells []string
	host, bw := "", []float64{}
	for i, t := range ts {
		cell := "-"
		if c := rows[i][0]; c.Host {
			cell = fmt.Sprintf("%s; measured %s (%s)", tokS(c.CeilingTokS), tokS(*c.MeasuredTokS), percent(c.efficiency()))
			if t.BenchStandIn {
				cell += " stand-in"
			}
			bw = append(bw, c.BandwidthGBs)
			if host == "" {
				host = c.Name
			}
		}
		hostCells = append(hostCells, cell)
	}
	if host != "" {
		fmt.Fprintf(b, "| %s | %s | %s |\n", MDText(host), bandwidthRange(bw), strings.Join(hostCells, " | "))
	}
	for _, dev := range catalogRows(rows[0]) {
		cells := make([]string, len(ts))
		for i := range ts {
			cells[i] = "-"
			for _, c := range rows[i] {
				if c.Device == dev.Device {
					cells[i] = tokS(c.CeilingTokS)
					if c.Target {
						cells[i] = "**" + cells[i] + "** (target)"
					}
				}
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", MDText(dev.Name), trimFloat(dev.BandwidthGBs), strings.Join(cells, " | "))
	}
}

func catalogRows(rows []Ceiling) []Ceiling {
	var out []Ceiling
	for _, c := range rows {
		if !c.Host {
			out = append(out, c)
		}
	}
	return out
}

func bandwidthRange(bw []float64) string {
	lo, hi := bw[0], bw[0]
	for _, v := range bw {
		lo, hi = min(lo, v), max(hi, v)
	}
	if fmt.Sprintf("%.2f", lo) == fmt.Sprintf("%.2f", hi) {
		return fmt.Sprintf("%.2f", lo)
	}
	return fmt.Sprintf("%.2f-%.2f", lo, hi)
}

func trimFloat(v float64) string { return fmt.Sprintf("%g", v) }

// MDText makes text safe inside a Markdown table cell or list item.
func MDText(s string) string {
	return strings.NewReplacer("|", `\|`, "\r", " ", "\n", " ", "<", "&lt;", ">", "&gt;").Replace(printable(s))
}

// MDCode makes text safe inside `code` in a table cell.
func MDCode(s string) string {
	return strings.NewReplacer("|", `\|`, "`", "'", "\n", " ").Replace(printable(s))
}

// printable drops control characters (from tool logs) that no reader of
// a report wants and XML-based viewers reject: the same neutralising as
// the terminal gets.
func printable(s string) string { return safetext.Printable(s) }
