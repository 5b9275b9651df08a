package report

import (
	"html"
	"regexp"
	"strings"
	"testing"
	"time"
)

// renderings are both reports of r, as text.
func renderings(t *testing.T, r Report) (page, md string) {
	t.Helper()
	b, err := HTML(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), string(Markdown(r))
}

// text is a page's text as a reader sees it (html/template writes "+"
// as &#43;).
func text(page string) string {
	return html.UnescapeString(page)
}

// Both reports lead with the decision: the summary (ship, failed and
// why, what to try) comes before the targets' table.
func TestSummaryLeads(t *testing.T) {
	page, md := renderings(t, sample())
	for name, doc := range map[string]string{"report.html": page, "report.md": md} {
		ship, failed, try, table := strings.Index(doc, "Ship:"), strings.Index(doc, "Failed:"), strings.Index(doc, "What to try:"), strings.Index(doc, "| Target | Format | Device |")
		if name == "report.html" {
			table = strings.Index(doc, "<th>Target</th><th>Format</th><th>Device</th>")
		}
		if ship < 0 || failed < ship || try < failed || table < try {
			t.Errorf("%s: ship at %d, failed at %d, what to try at %d, the table at %d: the summary must come first", name, ship, failed, try, table)
		}
	}
	s := sample().Summary()
	if len(s.Ship) != 1 || len(s.Failed) != 2 || len(s.NotRun) != 0 {
		t.Fatalf("summary %+v", s)
	}
	ship := s.Ship[0]
	if ship.Target != "laptop-q4km" || ship.Size != "100.6 MiB" || ship.Verdict != "ok" || ship.Measure != "perplexity delta +1.021, max 2.00" ||
		len(ship.Notes) != 1 || ship.Notes[0] != "180 of 272 tensors required fallback quantization (gguf-quantize:q4_k_m)" {
		t.Errorf("ship %+v", ship)
	}
	gate, blocked := s.Failed[0], s.Failed[1]
	if gate.Why != "perplexity delta +7.187 over max_delta 2.00 (31.500 against baseline 24.313)" ||
		len(gate.Notes) != 1 || gate.Notes[0] != "40 of 272 tensors required fallback quantization (gguf-quantize:q2_k)" {
		t.Errorf("why q2k: %q, notes %q", gate.Why, gate.Notes)
	}
	try := strings.Join(gate.Try, "\n")
	for _, want := range []string{"gguf-q4_k_m (4.90 bits per weight) or gguf-q8_0 (8.51 bits per weight)", "with: {imatrix: true}",
		"quality.perplexity.max_delta", "broken conversion, not rounding: read the log of gguf-quantize:q2_k: /cache/objects/ab/step.log",
		"stand-in tools ran 2 of its steps"} {
		if !strings.Contains(try, want) {
			t.Errorf("what to try for laptop-q2k lacks %q:\n%s", want, try)
		}
	}
	if blocked.Why != "step mlc-convert-weight failed: mlc_llm exited with code 1" ||
		len(blocked.Try) != 1 || !strings.Contains(blocked.Try[0], "read the log of mlc-convert-weight: /cache/logs/mlc-convert-weight-ef.log") {
		t.Errorf("blocked %+v", blocked)
	}
	for _, want := range []string{"Ship:", "180 of 272 tensors required fallback quantization", "perplexity delta +7.187 over max_delta 2.00",
		"/cache/logs/mlc-convert-weight-ef.log", "gguf-q8_0 (8.51 bits per weight)", "40 of 272 tensors required fallback quantization (gguf-quantize:q2_k)"} {
		if !strings.Contains(text(page), want) || !strings.Contains(md, want) {
			t.Errorf("%q is not in both reports", want)
		}
	}
}

// What the summary says for each way a target is not published.
func TestSummaryWhyAndTry(t *testing.T) {
	nan := func() float64 { var z float64; return z / z }()
	for _, tc := range []struct {
		name     string
		r        Report
		why      string
		try      []string // substrings, each in some suggestion
		notInTry []string
	}{
		{"a passing sibling on the device", Report{Targets: []Target{
			{Name: "q4", Format: "gguf-q4_k_m", Device: "x86-laptop", Outcome: OutcomeGateFailed, Verdict: "fail",
				Perplexity: &Perplexity{Baseline: 10, Converted: 11.5, Delta: 1.5, WarnDelta: 0.5, MaxDelta: 1}},
			{Name: "q8", Format: "gguf-q8_0", Device: "x86-laptop", Outcome: OutcomePublished, Verdict: "excellent"},
		}}, "perplexity delta +1.500 over max_delta 1.00 (11.500 against baseline 10.000)",
			[]string{"ship q8 (gguf-q8_0) instead: it passed on the same device", "gguf-q5_1 (6.04 bits per weight) or gguf-q6_k (6.57 bits per weight)", "with: {imatrix: true}"},
			[]string{"broken conversion", "or gguf-q8_0"}},
		{"an interval that reaches max_delta", Report{Targets: []Target{{Name: "a", Format: "gguf-q4_0", Device: "apple-a18", Outcome: OutcomeGateFailed,
			Perplexity: &Perplexity{Baseline: 18, Converted: 18.354, Delta: 0.354, WarnDelta: 0.1, MaxDelta: 0.3, DeltaCI95: &[2]float64{0.26, 0.44}}}}},
			"perplexity delta +0.354 [+0.26, +0.44] over max_delta 0.30 (18.354 against baseline 18.000)",
			[]string{"the delta's 95% interval [+0.26, +0.44] reaches max_delta 0.30: score more tokens", "quality.perplexity.max_chunks: 0"}, []string{"broken"}},
		{"a step's log pointer", Report{Failures: []Failure{{Subject: "q2-check", Step: true, Message: "step q2-check failed: edgepipe-fail exited with code 1; last lines of its log (/w/q2.log):"}},
			Targets: []Target{{Name: "a", Format: "f", Device: "d", Outcome: OutcomeBlocked, FailedSteps: []string{"q2-check"},
				StepLogs: []StepLog{{"q2-check", "q2.log"}}}}},
			"step q2-check failed: edgepipe-fail exited with code 1", []string{"read the log of q2-check: q2.log; fix the cause"}, nil},
		{"not a number", Report{Targets: []Target{{Name: "a", Format: "gguf-q8_0", Device: "x86-laptop", Outcome: OutcomeGateFailed,
			Perplexity:   &Perplexity{Baseline: 10, Converted: nan, Delta: nan, WarnDelta: 0.5, MaxDelta: 2},
			RejectedStep: "gguf-quantize:q8_0", StepLogs: []StepLog{{"perplexity:q8_0", "p.log"}, {"gguf-quantize:q8_0", "q.log"}}}}},
			"perplexity is not a finite number (NaN against baseline 10)", []string{"not a number means a broken conversion, not rounding: read the log of gguf-quantize:q8_0: q.log"},
			[]string{"imatrix", "more bits"}},
		{"accuracy", Report{Targets: []Target{{Name: "a", Format: "onnx-int8", Device: "x86-laptop", Outcome: OutcomeGateFailed,
			Accuracy: &Accuracy{Reference: 0.9, Converted: 0.85, Drop: 0.05, MaxDrop: 0.02}}}},
			"top-1 drop 5.00 pt over max_drop 2.00 pt (85.00% against the reference's 90.00%)", []string{"data.calibration", "quality.accuracy.max_drop"}, nil},
		{"agreement", Report{Targets: []Target{{Name: "a", Format: "onnx-int8", Device: "x86-laptop", Outcome: OutcomeGateFailed,
			Agreement: &AgreementGate{Agreement: 0.9, Min: 0.99}}}},
			"top-1 agreement with the fp32 model 90.00% under min 99.00%", []string{"quality.agreement.min"}, nil},
		{"a check, an earlier folder left", Report{Targets: []Target{{Name: "a", Format: "gguf-q8_0", Device: "x86-laptop", Outcome: OutcomeGateFailed,
			Perplexity: &Perplexity{Delta: 0.1, WarnDelta: 0.5, MaxDelta: 2, Baseline: 10, Converted: 10.1}, Check: `check "decode" of step bench:q8 failed: 3 tok/s under 10`,
			StaleFolder: "out/a", CheckStep: "bench:q8", StepLogs: []StepLog{{"gguf-quantize:q8_0", "q.log"}, {"bench:q8", "bench.log"}}}}},
			`check "decode" of step bench:q8 failed: 3 tok/s under 10; out/a still holds an earlier run's artifact, which this run did not replace`,
			[]string{"read what the check measured in the log of bench:q8: bench.log"}, []string{"more bits", "max_delta", "q.log"}},
		{"stopped by fail-fast", Report{Targets: []Target{{Name: "a", Format: "f", Device: "d", Outcome: OutcomeNotRun, StoppedBy: "q2-check"}}},
			"not built: fail-fast stopped the run after q2-check failed", []string{"--keep-going"}, nil},
		{"interrupted", Report{ExitText: "interrupted", Targets: []Target{{Name: "a", Format: "f", Device: "d", Outcome: OutcomeNotRun}}},
			"not built: the run ended first (interrupted)", []string{"run again"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.r.Summary()
			items := append(s.Failed, s.NotRun...)
			if len(items) == 0 {
				t.Fatalf("no failed item: %+v", s)
			}
			it := items[0]
			if it.Why != tc.why {
				t.Errorf("why %q, want %q", it.Why, tc.why)
			}
			all := strings.Join(it.Try, "\n")
			for _, want := range tc.try {
				if !strings.Contains(all, want) {
					t.Errorf("what to try lacks %q:\n%s", want, all)
				}
			}
			for _, not := range tc.notInTry {
				if strings.Contains(all, not) {
					t.Errorf("what to try says %q:\n%s", not, all)
				}
			}
		})
	}
}

// Nothing published: the summary says so, not an empty list.
func TestSummaryShipsNothing(t *testing.T) {
	r := Report{Recipe: "r", Targets: []Target{{Name: "a", Format: "f", Device: "d", Outcome: OutcomeBlocked, FailedSteps: []string{"s"}}}}
	page, md := renderings(t, r)
	if !strings.Contains(md, "**Ship:** nothing: no target was published.") || !strings.Contains(page, "<strong>Ship:</strong> nothing: no target was published.") {
		t.Errorf("no 'ship nothing' line:\n%s", md)
	}
}

// The legend defines the verdicts of the gates the report has, with the
// recipe's thresholds when every target shares them.
func TestLegend(t *testing.T) {
	rows := sample().Legend()
	got := map[string]string{}
	for _, l := range rows {
		got[l.Term] = l.Meaning
	}
	if !strings.Contains(got["excellent"], "under warn_delta (0.50)") || !strings.Contains(got["ok"], "from warn_delta (0.50) up to max_delta (2.00)") ||
		!strings.Contains(got["fail"], "over max_delta (2.00), or a perplexity that is not a finite number") || !strings.Contains(got["fail"], "exits 3") ||
		got["stand-in"] == "" || got["earlier run"] != "" {
		t.Errorf("legend %v", got)
	}
	r := sample()
	r.Targets[1].Perplexity.MaxDelta = 3
	for _, l := range r.Legend() {
		if l.Term == "fail" && !strings.Contains(l.Meaning, "max_delta (per target)") {
			t.Errorf("thresholds that differ: %q", l.Meaning)
		}
	}
	vision := Report{Targets: []Target{
		{Outcome: OutcomePublished, Verdict: "ok", Accuracy: &Accuracy{MaxDrop: 0.01}},
		{Outcome: OutcomeGateFailed, Verdict: "fail", Agreement: &AgreementGate{Min: 0.99}},
		{Outcome: OutcomePublished},
	}}
	got = map[string]string{}
	for _, l := range vision.Legend() {
		got[l.Term] = l.Meaning
	}
	if !strings.Contains(got["excellent"], "drop of 0 or less") || !strings.Contains(got["excellent"], "agreement with the fp32 model of 100%") ||
		!strings.Contains(got["ok"], "max_drop (1.00 pt)") || !strings.Contains(got["fail"], "agreement under min (99.00%)") ||
		strings.Contains(got["excellent"], "perplexity") || got["published (no gate)"] == "" {
		t.Errorf("vision legend %v", got)
	}
	page, md := renderings(t, sample())
	if !strings.Contains(md, "| Legend | Meaning |") || !strings.Contains(md, "| excellent | perplexity delta") ||
		!strings.Contains(page, `<span class="excellent">excellent</span></td><td>perplexity delta`) {
		t.Errorf("the legend is not in both reports")
	}
	if len((Report{}).Legend()) != 0 {
		t.Errorf("an empty report has a legend")
	}
}

// The steps' notes are shown per target in both reports.
func TestStepNotes(t *testing.T) {
	page, md := renderings(t, sample())
	if !strings.Contains(md, "  - `gguf-quantize:q4_k_m`: fallbacks: 180 of 272 tensors required fallback quantization; 150 x q4_K-&gt;q5_0") {
		t.Errorf("report.md lacks the quantize step's note")
	}
	if !strings.Contains(page, `<li><span class="id">gguf-quantize:q4_k_m</span>: fallbacks: 180 of 272 tensors required fallback quantization; 150 x q4_K-&gt;q5_0; 30 x q6_K-&gt;q8_0</li>`) {
		t.Errorf("report.html lacks the quantize step's note")
	}
	r := sample()
	r.SourceNote = "The source was already quantized (gguf Q4_K_M)"
	page, md = renderings(t, r)
	if !strings.Contains(page, r.SourceNote) || !strings.Contains(md, r.SourceNote) {
		t.Errorf("the source note is not in both reports")
	}
}

// After run --target, a target an earlier run published is in both
// reports, marked with its date, and the count says so.
func TestEarlierTargets(t *testing.T) {
	r := Report{Recipe: "sel", ExitText: "ok", Published: 1, Targets: []Target{
		{Name: "laptop-q2", Format: "gguf-q2_k", Device: "x86-laptop", Outcome: OutcomePublished, Verdict: "ok", Artifact: "artifacts/sel/laptop-q2",
			Earlier: true, PublishedAt: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), SizeBytes: 2048,
			Perplexity: &Perplexity{Baseline: 10, Converted: 11, Delta: 1, WarnDelta: 0.5, MaxDelta: 5}},
		{Name: "laptop-q8", Format: "gguf-q8_0", Device: "x86-laptop", Outcome: OutcomePublished, Verdict: "excellent", Artifact: "artifacts/sel/laptop-q8"},
	}}
	want := "1 of 1 targets this run built published, and 1 published by an earlier run is still in the output folder; exit code 0 (ok)."
	if got := r.PublishedLine(); got != want {
		t.Errorf("published line %q, want %q", got, want)
	}
	page, md := renderings(t, r)
	for _, w := range []string{want, "published by an earlier run on 2026-01-02 03:04 UTC"} {
		if !strings.Contains(page, w) || !strings.Contains(md, w) {
			t.Errorf("%q is not in both reports", w)
		}
	}
	if !strings.Contains(md, "| laptop-q2 | `gguf-q2_k` | x86-laptop | 2.0 KiB | 11.000 | +1.000 | ok | `artifacts/sel/laptop-q2` (earlier run, 2026-01-02 03:04 UTC) |") {
		t.Errorf("report.md's row for the earlier target:\n%s", md)
	}
	if !strings.Contains(page, `<span class="note">earlier run, 2026-01-02 03:04 UTC</span>`) || strings.Contains(page, "1 of 2 targets") {
		t.Errorf("report.html does not mark the earlier target")
	}
	if strings.Contains(md, "1 of 2 targets") || strings.Contains(md, "1 of 1 targets published;") {
		t.Errorf("report.md counts only this run's targets as published:\n%s", md)
	}
	// An earlier target's bench ran on the earlier run's host.
	bw := 6.5
	r.Targets[0].Bench = sample().Targets[0].Bench
	r.Targets[0].Bench.HostBandwidthGBs = &bw
	if rows := r.Ceilings(r.Targets[0]); len(rows) == 0 || !strings.HasPrefix(rows[0].Name, "the earlier run's host") {
		t.Errorf("an earlier target's host row %+v", rows)
	}
}

// A failed target shows its size, where its rejected model is and its
// logs.
func TestRejectedTarget(t *testing.T) {
	page, md := renderings(t, sample())
	for _, want := range []string{"| laptop-q2k | `gguf-q2_k` | apple-a18 | 55.0 MiB |",
		"- rejected model (55.0 MiB), kept in the cache: `/cache/objects/ab/model-q2_k.gguf`",
		"- logs:\n  - `gguf-quantize:q2_k`: `/cache/objects/ab/step.log`\n  - `perplexity:q2_k`: `/cache/objects/cd/step.log`\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, want := range []string{"<p>Rejected model (55.0 MiB), kept in the cache: <code>/cache/objects/ab/model-q2_k.gguf</code></p>",
		`<li><span class="id">gguf-quantize:q2_k</span>: <code>/cache/objects/ab/step.log</code></li>`,
		`<td class="n">55.0 MiB<br/><span class="note">not published</span></td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
}

// Text in the new sections (a step's note, a path, a check's detail)
// reaches the pages as text, never as markup.
func TestSummaryEscapes(t *testing.T) {
	r := sample()
	evil := `<script>alert(1)</script>`
	r.Targets[1].Rejected = "/cache/" + evil
	r.Targets[1].StepLogs = []StepLog{{evil, evil + ".log"}}
	r.Targets[1].Notes = []Note{{Step: evil, Text: evil}}
	r.Targets[1].Perplexity = nil
	r.Targets[1].Check = evil
	r.Targets[2].FailedSteps = []string{evil}
	r.SourceNote = evil
	page, md := renderings(t, r)
	// In Markdown, a code span's content is literal text.
	md = regexp.MustCompile("`[^`\n]*`").ReplaceAllString(md, "")
	if strings.Contains(page, "<script") || strings.Contains(md, "<script") {
		t.Errorf("markup from the run reached a report unescaped")
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("report.html lacks the escaped text")
	}
}

// A failure no target's line explains (a step no target needs, an error
// of the run) is in the summary's failed list too, with what to try.
func TestSummaryOtherFailures(t *testing.T) {
	r := Report{Recipe: "gate", Targets: []Target{{Name: "ok-q8", Format: "gguf-q8_0", Device: "x86-laptop", Outcome: OutcomePublished, Verdict: "excellent"}},
		Failures: []Failure{
			{Subject: "smoke", Step: true, Message: "step smoke failed: edgepipe exited with code 2; last lines of its log (.cache/logs/smoke.log):", LogName: ".cache/logs/smoke.log"},
			{Message: "push to oci://r/m failed: 401"},
		}}
	s := r.Summary()
	if len(s.Other) != 2 || s.Other[0].Step != "smoke" || s.Other[0].Why != "step smoke failed: edgepipe exited with code 2" ||
		len(s.Other[0].Try) != 1 || !strings.Contains(s.Other[0].Try[0], "read the log of smoke: .cache/logs/smoke.log") ||
		s.Other[1].Why != "push to oci://r/m failed: 401" || s.Other[1].Try != nil {
		t.Fatalf("other failures %+v", s.Other)
	}
	page, md := renderings(t, r)
	for _, want := range []string{"- **step smoke**: **step smoke failed: edgepipe exited with code 2**\n", "- **push to oci://r/m failed: 401**\n",
		"**What to try:**\n\n- **step smoke**:\n  - read the log of smoke: .cache/logs/smoke.log"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if !strings.Contains(page, `<li><strong>step smoke</strong>: <span class="fail">step smoke failed: edgepipe exited with code 2</span></li>`) {
		t.Errorf("report.html lacks the step's failure")
	}
	// Nothing to try: no heading.
	r.Failures = r.Failures[1:]
	if _, md := renderings(t, r); strings.Contains(md, "What to try") {
		t.Errorf("a 'What to try' heading with nothing under it:\n%s", md)
	}
}
