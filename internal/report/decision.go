package report

import (
	"fmt"
	"strings"
)

// DecisionRow is one target's row of an image-classification run's
// decision table (the domain brief's: decide from latency, memory and
// accuracy measured on the device): what the artifact keeps of the fp32
// model beside what it costs on this host. Cells are formatted, "-" where
// nothing was measured.
type DecisionRow struct {
	Target, Format, Runtime, Size string
	// Quality is top-1 accuracy, or agreement with the fp32 model on an
	// unlabelled set (labelled so); Drop is the accuracy drop, or the
	// share of images whose class changed, with the gate's limit.
	Quality, Drop string
	// P50, P95 and P99 are single-inference latencies (ms), Throughput
	// images/s.
	P50, P95, P99, Throughput string
	// PeakRSS is the bench process's peak resident set; Growth what
	// loading and running the model added to it.
	PeakRSS, Growth string
	Verdict         string
	Failed          bool
	// StandIn: a stand-in produced the timings or the scores.
	StandIn bool
}

// Decision is the decision table: one row per image-classification
// target, when at least one was benched (nil otherwise).
func (r Report) Decision() []DecisionRow {
	any := false
	for _, t := range r.Targets {
		any = any || t.VisionBench != nil
	}
	if !any {
		return nil
	}
	var rows []DecisionRow
	for _, t := range r.Targets {
		if t.Accuracy == nil && t.Agreement == nil && t.VisionBench == nil {
			continue
		}
		rows = append(rows, decisionRow(t))
	}
	return rows
}

func decisionRow(t Target) DecisionRow {
	d := DecisionRow{Target: t.Name, Format: t.Format, Runtime: "-", Size: "-", Quality: "-", Drop: "-", P50: "-", P95: "-", P99: "-",
		Throughput: "-", PeakRSS: "-", Growth: "-", StandIn: len(t.StandIns) > 0 || t.VisionBenchStandIn}
	size := t.SizeBytes
	if b := t.VisionBench; b != nil {
		d.Runtime = fmt.Sprintf("%s, %d threads, batch %d", b.RuntimeVersion, b.Threads, b.Batch)
		d.P50, d.P95, d.P99 = ms(b.LatencyP50MS), ms(b.LatencyP95MS), ms(b.LatencyP99MS)
		d.Throughput = tokS(b.ImagesPerS)
		d.PeakRSS = HumanBytes(b.PeakRSSBytes)
		d.Growth = signedBytes(b.RSSGrowthBytes)
		if size <= 0 {
			size = b.ModelBytes
		}
	}
	if size > 0 {
		d.Size = HumanBytes(size)
	}
	switch {
	case t.Accuracy != nil:
		d.Quality = fmt.Sprintf("top-1 %.2f%%", 100*t.Accuracy.Converted)
		d.Drop = fmt.Sprintf("%.2f pt (max %.2f)", 100*t.Accuracy.Drop, 100*t.Accuracy.MaxDrop)
	case t.Agreement != nil:
		d.Quality = fmt.Sprintf("agreement %.2f%%", 100*t.Agreement.Agreement)
		d.Drop = fmt.Sprintf("%.2f%% changed class (max %.2f%%)", 100*(1-t.Agreement.Agreement), 100*(1-t.Agreement.Min))
	}
	d.Verdict, d.Failed = decisionVerdict(t)
	return d
}

// decisionVerdict is the gate's verdict and what became of the artifact.
func decisionVerdict(t Target) (string, bool) {
	v := t.Verdict
	if v == "" {
		v = "no gate"
	}
	switch t.Outcome {
	case OutcomePublished:
		return v + ", published", false
	case OutcomeGateFailed:
		return v + ", not published", true
	case OutcomeBlocked:
		return "not built (upstream failed)", true
	default:
		return "not published", true
	}
}

func ms(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func signedBytes(n int64) string {
	if n < 0 {
		return "-" + HumanBytes(-n)
	}
	return "+" + HumanBytes(n)
}

// decisionNote says what the table's figures are, for both reports.
func decisionNote(rows []DecisionRow, r Report) string {
	host := ""
	for _, t := range r.Targets {
		if t.VisionBench != nil && t.VisionBench.Host != "" {
			host = " (" + t.VisionBench.Host + ")"
			break
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Measured on this host%s, each artifact in the runtime that gated it, in a process of its own: ", host)
	b.WriteString("single-inference latency in ms after the warm-up runs, images/s over the mean, ")
	b.WriteString("peak RSS (the bench process's peak resident set: interpreter, runtime and model together) and RSS growth ")
	b.WriteString("(resident set after the timed runs minus before the model loaded). A target that failed its gate is measured too.")
	if lo, hi, ok := loadRange(r); ok {
		load := fmt.Sprintf("%.2f", lo)
		if hi-lo >= 0.005 {
			load += fmt.Sprintf("-%.2f", hi)
		}
		fmt.Fprintf(&b, " The host's 1-minute load average was %s as the benches started (above the core count, other work shared the CPUs, and the latencies, p95/p99 most, include it).", load)
	}
	for _, d := range rows {
		if d.StandIn {
			b.WriteString(" Rows marked stand-in ran with stand-in tools: their figures are not measurements of the model.")
			break
		}
	}
	return b.String()
}

// loadRange is the lowest and highest load average the benches recorded.
func loadRange(r Report) (lo, hi float64, ok bool) {
	for _, t := range r.Targets {
		if b := t.VisionBench; b != nil && b.HostLoad1m != nil {
			if v := *b.HostLoad1m; !ok || v < lo {
				lo = v
			}
			hi, ok = max(hi, *b.HostLoad1m), true
		}
	}
	return lo, hi, ok
}
