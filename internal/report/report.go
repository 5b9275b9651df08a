// Package report renders what a run produced for people: report.html, a
// self-contained page (inline SVG, no external assets, readable offline),
// and report.md, its Markdown twin for CI job summaries. Per target: the
// format, device, size, the quality gate, stand-in markers, the on-host
// bench, and the bandwidth-bound decode ceiling on every catalog device
// against what was measured on this host.
//
// The package only renders: the caller (the run command) gathers a Report
// from the run's results and manifests, so the renderings are pure
// functions of it and testable against golden files.
package report

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/manifest"
)

// Report is one run.
type Report struct {
	Recipe string
	// Date is when the run started; Version the edgepipe that ran it.
	Date    time.Time
	Version string
	// Source is the recipe's model source (credentials removed), Revision
	// the commit it resolved to ("" for sources without one).
	Source   string
	Revision string
	ExitCode int
	ExitText string // what the exit code means
	// Published counts the targets this run published; targets an
	// earlier run published (Target.Earlier) are not in it.
	Published int
	Targets   []Target
	Failures  []Failure
	// SourceNote says what every artifact inherits from its source (one
	// that was already quantized); "" when nothing.
	SourceNote string
}

// Target outcomes, as the CI reports name them.
const (
	OutcomePublished  = "published"
	OutcomeGateFailed = "gate-failed"
	OutcomeBlocked    = "blocked"
	OutcomeNotRun     = "not-run"
)

// Target is one target's row and sections.
type Target struct {
	Name     string
	Format   string
	Device   string
	Outcome  string
	Verdict  string // excellent, ok, fail, or "" without a perplexity gate
	Artifact string // the published folder, relative where possible
	// Pushed lists the remotes the artifact reached (oci://...@DIGEST, S3
	// prefixes); PushFailed the remotes whose push failed.
	Pushed     []string
	PushFailed []string
	// SizeBytes is the published model's size; 0 when nothing was published.
	SizeBytes int64
	// Perplexity, KL divergence and top-1 agreement are nil when not measured.
	Perplexity *Perplexity
	// Accuracy is an image classifier's gate, in place of Perplexity.
	Accuracy *Accuracy
	// Agreement is an image classifier's agreement gate (with Accuracy,
	// or alone for an unlabelled evaluation set).
	Agreement     *AgreementGate
	KLDivergence  *float64
	Top1Agreement *float64
	// Generation is what the target's decode check measured (published or
	// not), nil when none ran.
	Generation *manifest.Generation
	// StandIns lists the steps that ran with stand-in tools: their numbers
	// are not measurements of the model.
	StandIns []string
	Bench    *manifest.Bench
	// BenchStandIn marks a bench whose timings came from a stand-in.
	BenchStandIn bool
	// VisionBench is an image classifier's bench, published or not (a
	// target that failed its gate was measured too); VisionBenchStandIn
	// marks one a stand-in timed.
	VisionBench        *manifest.VisionBench
	VisionBenchStandIn bool
	// Error says why the target was not published.
	Error string
	// Manifest and Logs are links, relative to the report's folder, to the
	// published folder's manifest.json and the step logs in it.
	Manifest string
	Logs     []string
	// StoppedBy is the failure after which fail-fast stopped the run before
	// this target (which needs nothing that failed) was built.
	StoppedBy string
	// Earlier marks a target this run did not build (run --target chose
	// others) whose folder an earlier run published, still in the output
	// folder; PublishedAt is when its manifest was written.
	Earlier     bool
	PublishedAt time.Time
	// Notes are what the target's steps observed and recorded (the
	// tensors llama-quantize had to fall back on, the precision a runtime
	// kept), one per step, from its manifest or this run's outputs.
	Notes []Note
	// FailedSteps are the steps whose failure kept the target from being
	// built; Check is the check, other than a quality gate's measurement,
	// that refused it ("check ... of step ... failed: ...").
	FailedSteps []string
	Check       string
	// Rejected is where the model a gate refused is (the output, in the
	// cache, of RejectedStep), and StepLogs the logs of the steps that
	// made and judged it, or of the steps that failed: paths on the
	// machine that ran, not links. Set for a target that was not
	// published. CheckStep is the step whose measurement Check judged.
	Rejected     string
	RejectedStep string
	CheckStep    string
	StepLogs     []StepLog
	// StaleFolder is the target's folder when it still holds an earlier
	// run's artifact that this run, whose gate refused the target, left
	// in place.
	StaleFolder string
}

// StepLog is one step's log.
type StepLog struct {
	Step string
	Path string
}

// Note is one step's recorded observation about a target.
type Note struct {
	Step string
	Text string
}

// Perplexity is the gate's measurement.
type Perplexity struct {
	Baseline, Converted, Delta, WarnDelta, MaxDelta float64
	// DeltaCI95 is the delta's 95% interval, nil when not measured.
	DeltaCI95 *[2]float64
}

// Accuracy is an image classifier's gate: top-1 of the reference and of
// the converted model, as fractions.
type Accuracy struct {
	Reference, Converted, Drop, MaxDrop float64
}

// AgreementGate is the agreement gate: the share of images on which the
// converted model picks the fp32 model's class, and its minimum. Not
// accuracy.
type AgreementGate struct {
	Agreement, Min float64
}

// Failure is one root cause of a failed run.
type Failure struct {
	// Subject is the target or step that failed; Step marks a step.
	Subject string
	Step    bool
	Message string
	// LogName and LogTail are the failed step's log and its last lines.
	LogName string
	LogTail []string
}

// Ceiling is one row of a target's ceiling chart.
type Ceiling struct {
	Device string // catalog id, or "" for this host
	Name   string
	// BandwidthGBs is the device's (or the host's measured) bandwidth.
	BandwidthGBs float64
	CeilingTokS  float64
	// MeasuredTokS is set on the host's row when a bench ran.
	MeasuredTokS *float64
	Host         bool
	// Target marks the target's own device.
	Target bool
}

// Ceilings is the target's decode ceiling on this host (when it was
// benched) and on every catalog device: bandwidth / model size, with the
// model's size in GB (1e9 bytes) as catalog bandwidths are in GB/s. Nil
// when nothing was published (no size to divide by, or the size of a
// model nobody may ship), and for an image classifier, which decodes no
// tokens (its manifest has no ceiling either; the decision table is its
// speed). The reports show the rows of Report.Ceilings.
func (t Target) Ceilings() []Ceiling {
	if t.SizeBytes <= 0 || (t.Outcome != "" && t.Outcome != OutcomePublished) ||
		t.Accuracy != nil || t.Agreement != nil || t.VisionBench != nil {
		return nil
	}
	gb := float64(t.SizeBytes) / 1e9
	var rows []Ceiling
	if b := t.Bench; b != nil && b.HostBandwidthGBs != nil && *b.HostBandwidthGBs > 0 {
		bytes := b.ModelBytes
		if bytes <= 0 {
			bytes = t.SizeBytes
		}
		c := Ceiling{Name: "this host", BandwidthGBs: *b.HostBandwidthGBs, Host: true,
			CeilingTokS: catalog.DecodeCeiling(*b.HostBandwidthGBs, float64(bytes)/1e9)}
		if t.Earlier {
			c.Name = "the earlier run's host"
		}
		if b.HostCeilingTokS != nil {
			c.CeilingTokS = *b.HostCeilingTokS
		}
		if b.Host != "" {
			c.Name += " (" + b.Host + ")"
		}
		m := b.DecodeTokS
		c.MeasuredTokS = &m
		rows = append(rows, c)
	}
	for _, d := range catalog.Devices() {
		if d.MemoryBandwidthGBs <= 0 {
			continue
		}
		rows = append(rows, Ceiling{Device: d.ID, Name: d.Name, BandwidthGBs: d.MemoryBandwidthGBs,
			CeilingTokS: catalog.DecodeCeiling(d.MemoryBandwidthGBs, gb), Target: d.ID == t.Device})
	}
	return rows
}

// Ceilings are the rows of t's ceilings the reports show: this host and
// the devices the run's targets are for, not every device of the catalog
// (a reader deciding what to ship compares the devices they ship to).
func (r Report) Ceilings(t Target) []Ceiling {
	devices := map[string]bool{}
	for _, o := range r.Targets {
		devices[o.Device] = true
	}
	var rows []Ceiling
	for _, c := range t.Ceilings() {
		if c.Host || devices[c.Device] {
			rows = append(rows, c)
		}
	}
	return rows
}

// efficiency is measured / ceiling, or NaN without both.
func (c Ceiling) efficiency() float64 {
	if c.MeasuredTokS == nil || c.CeilingTokS <= 0 {
		return math.NaN()
	}
	return *c.MeasuredTokS / c.CeilingTokS
}

// DeltaCell is a perplexity delta with its 95% interval when measured:
// "+0.412 [+0.30, +0.52]".
func DeltaCell(delta float64, ci *[2]float64) string {
	if ci == nil {
		return fmt.Sprintf("%+.3f", delta)
	}
	return fmt.Sprintf("%+.3f [%+.2f, %+.2f]", delta, ci[0], ci[1])
}

// HumanBytes prints a size in binary units, as the run summary does.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// tokS prints a rate with three significant digits, without exponents
// for the ranges decode speeds take.
func tokS(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	case v >= 10:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func percent(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }

// Agreement is how both reports write top-1 agreement: a percentage with
// one decimal (99.4%), so the two never disagree on the same number.
func Agreement(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// anyGeneration: a target of the run ran a decode check.
func (r Report) anyGeneration() bool {
	for _, t := range r.Targets {
		if t.Generation != nil {
			return true
		}
	}
	return false
}

// GenerationCell is a decode check in a few characters: the share of the
// original's greedy tokens the artifact agreed with and its mean KL
// divergence ("93.1% / KL 0.044"), "-" when none ran.
func GenerationCell(g *manifest.Generation) string {
	if g == nil {
		return "-"
	}
	kl := "-"
	if g.MeanKL != nil {
		kl = fmt.Sprintf("%.3f", *g.MeanKL)
	}
	return fmt.Sprintf("%s / KL %s", Agreement(g.TokenAgreement), kl)
}

// RunLine is the run's date, edgepipe version and source with its
// revision, as both reports head it.
func (r Report) RunLine() string {
	var parts []string
	if !r.Date.IsZero() {
		parts = append(parts, "run "+r.Date.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if r.Version != "" {
		parts = append(parts, "edgepipe "+r.Version)
	}
	if r.Source != "" {
		src := "source " + r.Source
		if r.Revision != "" {
			src += " at " + r.Revision
		}
		parts = append(parts, src)
	}
	return strings.Join(parts, "; ")
}
