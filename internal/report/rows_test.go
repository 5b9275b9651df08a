package report

import (
	"math"
	"strings"
	"testing"
)

// Each way a target ends has its own row in report.md.
func TestMarkdownTargetRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Target
		want string
	}{
		{"published with pushes", Target{Name: "a", Format: "gguf-q8_0", Device: "x86-laptop", Outcome: OutcomePublished, Verdict: "ok",
			Artifact: "out/a", SizeBytes: 2048, Perplexity: &Perplexity{Converted: 10.5, Delta: 0.25},
			Pushed: []string{"oci://r/m:a@sha256:1"}, PushFailed: []string{"s3::https://h/b/a/"}},
			"| a | `gguf-q8_0` | x86-laptop | 2.0 KiB | 10.500 | +0.250 | ok | `out/a`, `oci://r/m:a@sha256:1`, **push to `s3::https://h/b/a/` failed** |"},
		{"published without a gate", Target{Name: "a", Format: "onnx-fp32", Device: "d", Outcome: OutcomePublished, Artifact: "out/a"},
			"| a | `onnx-fp32` | d | - | - | - | published (no gate) | `out/a` |"},
		{"gate failed", Target{Name: "a", Format: "f", Device: "d", Outcome: OutcomeGateFailed, Verdict: "fail", Perplexity: &Perplexity{Converted: 13, Delta: 3}},
			"| a | `f` | d | - | 13.000 | +3.000 | **fail** | not published (gate failed) |"},
		{"blocked", Target{Name: "a", Format: "f", Device: "d", Outcome: OutcomeBlocked},
			"| a | `f` | d | - | - | - | - | not published (upstream failed) |"},
		{"stopped by fail-fast", Target{Name: "a", Format: "f", Device: "d", Outcome: OutcomeNotRun, StoppedBy: "gguf-convert:f16"},
			"| a | `f` | d | - | - | - | - | not run (stopped after `gguf-convert:f16` failed) |"},
		{"not run", Target{Name: "a", Format: "f", Device: "d", Outcome: OutcomeNotRun},
			"| a | `f` | d | - | - | - | - | not published |"},
		{"an outcome of a later edgepipe", Target{Name: "a", Format: "f", Device: "d", Outcome: "deferred"},
			"| a | `f` | d | - | - | - | - | not published |"},
		{"accuracy over agreement", Target{Name: "a", Format: "f", Device: "d", Outcome: OutcomeNotRun,
			Accuracy: &Accuracy{Converted: 0.9512, Drop: 0.0049}, Agreement: &AgreementGate{Agreement: 0.99, Min: 0.95}},
			"| a | `f` | d | - | top-1 95.12% | drop 0.49 pt | - | not published |"},
		{"agreement alone", Target{Name: "a", Format: "f", Device: "d", Outcome: OutcomeNotRun, Agreement: &AgreementGate{Agreement: 0.99, Min: 0.95}},
			"| a | `f` | d | - | agreement 99.00% | min 95.00% | - | not published |"},
		{"cells that would break the table", Target{Name: "a|b", Format: "f`x", Device: "<d>", Outcome: OutcomeNotRun},
			"| a\\|b | `f'x` | &lt;d&gt; | - | - | - | - | not published |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := string(Markdown(Report{Recipe: "r", Targets: []Target{tc.t}}))
			// The first row of the targets' table (the legend's come first).
			var row string
			_, table, _ := strings.Cut(md, "\n| Target | Format |")
			for _, l := range strings.Split(table, "\n") {
				if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| ---") {
					row = l
					break
				}
			}
			if row != tc.want {
				t.Errorf("row\n%s\nwant\n%s", row, tc.want)
			}
		})
	}
}

func TestDecisionVerdict(t *testing.T) {
	for _, tc := range []struct {
		t      Target
		want   string
		failed bool
	}{
		{Target{Verdict: "excellent", Outcome: OutcomePublished}, "excellent, published", false},
		{Target{Outcome: OutcomePublished}, "no gate, published", false},
		{Target{Verdict: "fail", Outcome: OutcomeGateFailed}, "fail, not published", true},
		{Target{Outcome: OutcomeBlocked}, "not built (upstream failed)", true},
		{Target{Verdict: "ok", Outcome: OutcomeNotRun}, "not published", true},
	} {
		if got, failed := decisionVerdict(tc.t); got != tc.want || failed != tc.failed {
			t.Errorf("%+v: %q %v, want %q %v", tc.t, got, failed, tc.want, tc.failed)
		}
	}
}

func TestNumberFormats(t *testing.T) {
	for v, want := range map[float64]string{1234.5: "1234", 1000: "1000", 123.45: "123.5", 12.345: "12.35", 1.2345: "1.23", 0.012345: "0.0123"} {
		if got := tokS(v); got != want {
			t.Errorf("tokS(%v) = %q, want %q", v, got, want)
		}
	}
	for d, want := range map[float64]string{-2: "0.01", 0: "1", 2: "100", 3: "1k", 5: "100k", 6: "1M", 7: "10M"} {
		if got := decade(d); got != want {
			t.Errorf("decade(%v) = %q, want %q", d, got, want)
		}
	}
	for _, tc := range []struct {
		bw   []float64
		want string
	}{
		{[]float64{6.5}, "6.50"},
		{[]float64{6.5, 6.501, 6.499}, "6.50"}, // the same to the digits shown
		{[]float64{7.25, 6.5, 6.9}, "6.50-7.25"},
	} {
		if got := bandwidthRange(tc.bw); got != tc.want {
			t.Errorf("bandwidthRange(%v) = %q, want %q", tc.bw, got, tc.want)
		}
	}
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 30: "5.0 GiB", 3 << 40: "3.0 TiB"} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
	m := 30.0
	if e := (Ceiling{MeasuredTokS: &m, CeilingTokS: 60}).efficiency(); e != 0.5 {
		t.Errorf("efficiency %v", e)
	}
	for _, c := range []Ceiling{{CeilingTokS: 60}, {MeasuredTokS: &m}} {
		if e := c.efficiency(); !math.IsNaN(e) {
			t.Errorf("efficiency of %+v = %v, want NaN without both numbers", c, e)
		}
	}
}

// A target with no size, or an image classifier, has no decode ceilings
// and no chart.
func TestNoCeilings(t *testing.T) {
	for name, tg := range map[string]Target{
		"no size":    {Name: "a", Device: "x86-laptop"},
		"classifier": {Name: "a", Device: "x86-laptop", SizeBytes: 5 << 20, Accuracy: &Accuracy{}},
		"agreement":  {Name: "a", Device: "x86-laptop", SizeBytes: 5 << 20, Agreement: &AgreementGate{}},
	} {
		if rows := tg.Ceilings(); rows != nil {
			t.Errorf("%s: %d ceilings", name, len(rows))
		}
		if c := newChart(tg, tg.Ceilings()); c != nil {
			t.Errorf("%s: a chart", name)
		}
	}
	rows := Target{Name: "a", Device: "x86-laptop", SizeBytes: 100 << 20}.Ceilings()
	marked := 0
	for _, r := range rows {
		if r.Target {
			marked++
			if r.Device != "x86-laptop" {
				t.Errorf("%s is marked as the target's device", r.Device)
			}
		}
		if r.Host || r.CeilingTokS <= 0 {
			t.Errorf("row %+v: no bench, so no host row, and every device has a ceiling", r)
		}
	}
	if marked != 1 {
		t.Errorf("%d rows marked as the target's device, want 1", marked)
	}
}

// The decode ceilings are this host's and the devices of the run's
// targets, not every catalog device; a target that was not published has
// none.
func TestCeilingsOfTheTargetsDevices(t *testing.T) {
	r := sample()
	var got []string
	for _, c := range r.Ceilings(r.Targets[0]) {
		if c.Host {
			got = append(got, "host")
		} else {
			got = append(got, c.Device)
		}
	}
	if strings.Join(got, " ") != "host apple-a18 webgpu-m3-max x86-laptop" {
		t.Errorf("ceiling rows %v, want this host and the three targets' devices (catalog order)", got)
	}
	md := string(Markdown(r))
	if strings.Contains(md, "NVIDIA H100") || !strings.Contains(md, "| Apple A18 (iPhone 16) | 60 | 568.9 |") {
		t.Errorf("report.md's ceilings are not the targets' devices:\n%s", md)
	}
	failed := r.Targets[1]
	failed.SizeBytes = 5 << 20
	if c := r.Ceilings(failed); c != nil {
		t.Errorf("laptop-q2k, not published, has ceilings %v", c)
	}
}
