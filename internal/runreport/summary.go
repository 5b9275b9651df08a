package runreport

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/report"
	"github.com/edgepipe/edgepipe/internal/termstatus"
)

// ReportPaths are the report.html and report.md a run left in outDir,
// relative to the working folder where possible.
func ReportPaths(outDir string) []string {
	var out []string
	for _, name := range []string{reportHTML, reportMarkdown} {
		p := filepath.Join(outDir, name)
		if _, err := os.Stat(p); err == nil {
			out = append(out, RelPath(p))
		}
	}
	return out
}

// WriteSummary prints one row per target: format, size, perplexity delta,
// verdict and where the artifact is; colour paints the verdicts (for a
// terminal).
func WriteSummary(stdout, stderr io.Writer, pl *plan.Plan, res *engine.RunResult, colour bool) {
	if res == nil {
		return
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	q1, q2 := "PPL", "DELTA"
	if !pl.Recipe.Traits().Generates {
		q1, q2 = "TOP-1", "DROP"
		if agreementOnly(pl) {
			q1, q2 = "AGREEMENT", "MIN"
		}
	}
	fmt.Fprintf(tw, "TARGET\tFORMAT\tSIZE\t%s\t%s\t%s\tARTIFACT\n", q1, q2, termstatus.Paint(colour, termstatus.Plain, "VERDICT"))
	for _, t := range pl.Recipe.Targets {
		size, ppl, delta, verdict, where := "-", "-", "-", "-", "-"
		if g := res.Gates[t.Name]; g != nil {
			ppl = fmt.Sprintf("%.3f", g.Converted)
			var ci *[2]float64
			if g.Low != nil && g.High != nil {
				ci = &[2]float64{*g.Low, *g.High}
			}
			delta = report.DeltaCell(g.Delta, ci)
			verdict = g.Verdict
		}
		if a := res.Accuracy[t.Name]; a != nil {
			ppl = fmt.Sprintf("%.2f%%", 100*a.Converted)
			delta = fmt.Sprintf("%+.2f pt", 100*a.Drop)
			verdict = a.Verdict
		} else if a := res.Agreement[t.Name]; a != nil {
			// Labelled as agreement wherever the column says top-1.
			ppl = fmt.Sprintf("%.2f%%", 100*a.Agreement)
			delta = fmt.Sprintf("min %.2f%%", 100*a.Min)
			if !agreementOnly(pl) {
				ppl = "agreement " + ppl
			}
			verdict = a.Verdict
		}
		if a := res.Agreement[t.Name]; a != nil && a.Verdict == manifest.VerdictFail {
			verdict = a.Verdict
		}
		if dir, ok := res.Published[t.Name]; ok {
			where = RelPath(dir)
			if m, err := manifest.Read(dir); err == nil && m.Metrics.SizeBytes != nil {
				size = report.HumanBytes(*m.Metrics.SizeBytes)
			}
			if verdict == "-" {
				verdict = "published (no gate)"
			}
		} else {
			switch {
			case verdict == manifest.VerdictFail:
				where = "not published (gate failed)"
			case checkFailed(res, t.Name):
				where = "not published (check failed)"
			case res.Stopped[plan.PublishStepID(t.Name)] != "":
				where = fmt.Sprintf("not run (stopped after %s failed)", res.Stopped[plan.PublishStepID(t.Name)])
			case slices.Contains(res.Skipped, plan.PublishStepID(t.Name)):
				where = "not published (upstream failed)"
			default:
				where = "not published"
			}
		}
		// Every cell of the column is painted (the default colour for
		// "-"), so the escapes add the same width to each and it aligns.
		verdict = termstatus.Paint(colour, termstatus.VerdictColour(verdict), verdict)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Format, size, ppl, delta, verdict, where)
	}
	tw.Flush()
	writeGenerations(stdout, pl, res)
	writeBenches(stdout, pl, res)
	writeDecision(stdout, pl, res)
	for _, err := range res.Failed {
		var se *engine.StepError
		if errors.As(err, &se) {
			fmt.Fprintf(stderr, "failed: %s (log: %s)\n", se.Step, se.LogPath)
		}
	}
}

// checkFailed: the target's publish refused it for a check that failed
// (a decode check, a logits check), not its perplexity.
func checkFailed(res *engine.RunResult, target string) bool {
	for _, err := range res.Failed {
		var ge *publish.GateError
		if errors.As(err, &ge) && ge.Target == target && ge.Check != nil {
			return true
		}
	}
	return false
}

// writeGenerations adds each target's decode check to the run summary,
// one line each: what share of the original's greedy tokens it agreed
// with and its mean KL divergence, against the target's bounds.
func writeGenerations(w io.Writer, pl *plan.Plan, res *engine.RunResult) {
	for _, t := range pl.Recipe.Targets {
		g, standIn := engine.TargetGeneration(pl, res, t.Name)
		if g == nil {
			continue
		}
		note := ""
		if standIn {
			note = " [stand-in: not a measurement]"
		}
		fmt.Fprintf(w, "generation %s: %s (min %s)%s\n", t.Name, report.GenerationCell(g), report.Agreement(g.MinTokenAgreement), note)
	}
}

// writeBenches adds each benched target's measurement to the run summary:
// decode speed and its latency percentiles, time to first token, and the
// decode speed against this host's bandwidth ceiling.
func writeBenches(w io.Writer, pl *plan.Plan, res *engine.RunResult) {
	for _, t := range pl.Recipe.Targets {
		b, standIn := engine.TargetBench(pl, res, t.Name)
		if b == nil {
			continue
		}
		note := ""
		if standIn {
			note = " [stand-in: not a measurement]"
		}
		fmt.Fprintf(w, "bench %s (%s, %d threads, %s): decode %.4g tok/s (token p50 %.2f ms, p95 %.2f, p99 %.2f); first token %.1f ms for %d tokens (prompt %.4g tok/s)%s\n",
			t.Name, b.Backend, b.Threads, b.Host, b.DecodeTokS, b.TokenP50MS, b.TokenP95MS, b.TokenP99MS,
			b.FirstTokenMS, b.PromptTokens, b.PromptTokS, note)
		if b.HostBandwidthGBs != nil && b.HostCeilingTokS != nil && b.Efficiency != nil {
			fmt.Fprintf(w, "  host memory bandwidth %.2f GB/s -> ceiling %.4g tok/s for %s; measured decode is %.0f%% of it\n",
				*b.HostBandwidthGBs, *b.HostCeilingTokS, report.HumanBytes(b.ModelBytes), 100**b.Efficiency)
		}
	}
}

// agreementOnly: every target of the vision recipe gates on agreement
// alone (an unlabelled set), so the summary's columns say so.
func agreementOnly(pl *plan.Plan) bool {
	for _, t := range pl.Recipe.Targets {
		if t.Quality.Agreement == nil || t.Quality.Accuracy != nil {
			return false
		}
	}
	return len(pl.Recipe.Targets) > 0
}

// writeDecision prints an image-classification run's decision table
// (report.Decision): per target its quality beside the latency and
// memory its bench measured, gate failures included.
func writeDecision(w io.Writer, pl *plan.Plan, res *engine.RunResult) {
	if pl.Recipe.Traits().Generates {
		return
	}
	var r report.Report
	for _, t := range pl.Recipe.Targets {
		rt := report.Target{Name: t.Name, Format: t.Format, Outcome: report.OutcomeNotRun}
		rt.VisionBench, rt.VisionBenchStandIn = engine.TargetVisionBench(pl, res, t.Name)
		rt.StandIns = engine.TargetStandIns(pl, res, t.Name)
		if a := res.Accuracy[t.Name]; a != nil {
			rt.Accuracy = &report.Accuracy{Reference: a.Reference, Converted: a.Converted, Drop: a.Drop, MaxDrop: a.MaxDrop}
			rt.Verdict = a.Verdict
		}
		if a := res.Agreement[t.Name]; a != nil {
			rt.Agreement = &report.AgreementGate{Agreement: a.Agreement, Min: a.Min}
			if rt.Verdict == "" || a.Verdict == manifest.VerdictFail {
				rt.Verdict = a.Verdict
			}
		}
		if dir, ok := res.Published[t.Name]; ok {
			rt.Outcome = report.OutcomePublished
			if m, err := manifest.Read(dir); err == nil && m.Metrics.SizeBytes != nil {
				rt.SizeBytes = *m.Metrics.SizeBytes
			}
		} else if rt.Verdict == manifest.VerdictFail {
			rt.Outcome = report.OutcomeGateFailed
		}
		r.Targets = append(r.Targets, rt)
	}
	rows := r.Decision()
	if rows == nil {
		return
	}
	fmt.Fprintf(w, "decision table (this host; latency per inference in ms):\n")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tFORMAT\tSIZE\tQUALITY\tDROP\tP50\tP95\tP99\tIMG/S\tPEAK RSS\tRSS GROWTH\tVERDICT\tRUNTIME")
	for _, d := range rows {
		name := d.Target
		if d.StandIn {
			name += " [stand-in]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, d.Format, d.Size, d.Quality, d.Drop,
			d.P50, d.P95, d.P99, d.Throughput, d.PeakRSS, d.Growth, d.Verdict, d.Runtime)
	}
	tw.Flush()
}
