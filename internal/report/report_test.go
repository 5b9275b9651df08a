package report

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/manifest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func f(v float64) *float64 { return &v }

// sample is a run with one benched, published target, one whose gate
// failed and a failed step whose log holds markup and a control byte.
func sample() Report {
	return Report{
		Recipe: "demo", ExitCode: 3, ExitText: "a quality gate failed", Published: 1,
		Date: time.Date(2026, 12, 2, 7, 30, 0, 0, time.UTC), Version: "0.1.0-dev", Source: "hf://HuggingFaceTB/SmolLM2-135M-Instruct@main",
		Revision: "12fd25f77366fa6b3b4b768ec3050bf629380bac",
		Targets: []Target{
			{
				Name: "laptop-q4km", Format: "gguf-q4_k_m", Device: "x86-laptop", Outcome: OutcomePublished,
				Manifest: "laptop-q4km/manifest.json", Logs: []string{"laptop-q4km/logs/gguf-quantize_q4_k_m.log"},
				Verdict: "ok", Artifact: "artifacts/demo/laptop-q4km", SizeBytes: 105_472_000,
				Notes:        []Note{{Step: "gguf-quantize:q4_k_m", Text: "fallbacks: 180 of 272 tensors required fallback quantization; 150 x q4_K->q5_0; 30 x q6_K->q8_0"}},
				Perplexity:   &Perplexity{Baseline: 24.3127, Converted: 25.334, Delta: 1.0213, WarnDelta: 0.5, MaxDelta: 2},
				KLDivergence: f(0.0465), Top1Agreement: f(0.873),
				Generation: &manifest.Generation{Runtime: "llama.cpp", Sequences: 4, Steps: 173, TokenAgreement: 0.931, MeanKL: f(0.0442)},
				Bench: &manifest.Bench{Backend: "llama.cpp", Host: "linux/amd64; Intel(R) Xeon(R) Processor; 2 cores",
					WarmupRuns: 10, TimedRuns: 50, PromptTokens: 128, DecodeTokens: 50, Threads: 2, ModelBytes: 105_472_000,
					TokenP50MS: 25.81, TokenP95MS: 28.2, TokenP99MS: 31.75, FirstTokenMS: 161.3, PromptTokS: 788, DecodeTokS: 38.1,
					HostBandwidthGBs: f(6.5), HostCeilingTokS: f(61.63), Efficiency: f(38.1 / 61.63)},
			},
			{
				Name: "laptop-q2k", Format: "gguf-q2_k", Device: "apple-a18", Outcome: OutcomeGateFailed, Verdict: "fail",
				Perplexity: &Perplexity{Baseline: 24.3127, Converted: 31.5, Delta: 7.1873, WarnDelta: 0.5, MaxDelta: 2},
				StandIns:   []string{"gguf-quantize:q2_k", "perplexity:q2_k"},
				Error:      "target laptop-q2k failed its quality gate: perplexity 31.5000 against baseline 24.3127",
				SizeBytes:  57_671_680, Rejected: "/cache/objects/ab/model-q2_k.gguf", RejectedStep: "gguf-quantize:q2_k",
				StepLogs: []StepLog{{"gguf-quantize:q2_k", "/cache/objects/ab/step.log"}, {"perplexity:q2_k", "/cache/objects/cd/step.log"}},
				Notes:    []Note{{Step: "gguf-quantize:q2_k", Text: "fallbacks: 40 of 272 tensors required fallback quantization; 40 x q2_K->q4_0"}},
			},
			{Name: "browser", Format: "mlc-q4f16_1", Device: "webgpu-m3-max", Outcome: OutcomeBlocked,
				Error: "not built: step mlc-convert-weight failed", FailedSteps: []string{"mlc-convert-weight"},
				StepLogs: []StepLog{{"mlc-convert-weight", "/cache/logs/mlc-convert-weight-ef.log"}}},
		},
		Failures: []Failure{
			{Subject: "laptop-q2k", Message: "target laptop-q2k failed its quality gate: perplexity 31.5000 against baseline 24.3127"},
			{Subject: "mlc-convert-weight", Step: true, Message: "step mlc-convert-weight failed: mlc_llm exited with code 1",
				LogName: "logs/mlc.log", LogTail: []string{"loading <weights> & shards", "error: \x01 shard | 3 ```missing```"}},
		},
	}
}

func TestMarkdownGolden(t *testing.T) {
	got := Markdown(sample())
	golden := filepath.Join("testdata", "report.golden.md")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("report.md differs from %s (run go test ./internal/report -update after checking the change):\n%s", golden, got)
	}
}

// report.html must be well-formed (strict XML with HTML's entities), with
// one inline SVG chart per published target and nothing fetched.
func TestHTMLIsWellFormedWithInlineSVG(t *testing.T) {
	page, err := HTML(sample())
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(page))
	dec.Strict = true
	dec.Entity = xml.HTMLEntity
	var svgs, rects, stack int
	var texts []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("report.html is not well-formed: %v\n%s", err, page)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			stack++
			switch e.Name.Local {
			case "svg":
				svgs++
				if e.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("svg in namespace %q", e.Name.Space)
				}
			case "rect":
				rects++
			case "script", "img", "link", "iframe":
				t.Errorf("report.html has a <%s>: it must be self-contained and inert", e.Name.Local)
			}
			for _, a := range e.Attr {
				// A link to a file beside the report (a manifest, a log) is
				// followed only when clicked, and stays inside the folder.
				if e.Name.Local == "a" && a.Name.Local == "href" && !strings.Contains(a.Value, ":") &&
					!strings.HasPrefix(a.Value, "/") && !strings.Contains(a.Value, "..") {
					continue
				}
				if a.Name.Local == "href" || a.Name.Local == "src" {
					t.Errorf("<%s %s=%q>: report.html must fetch nothing", e.Name.Local, a.Name.Local, a.Value)
				}
			}
		case xml.EndElement:
			stack--
		case xml.CharData:
			texts = append(texts, string(e))
		}
	}
	if stack != 0 {
		t.Errorf("unbalanced elements: %d left open", stack)
	}
	if svgs != 1 {
		t.Errorf("want 1 chart (one published target), got %d", svgs)
	}
	// Host ceiling + measured + the devices of the run's targets
	// (x86-laptop, apple-a18, webgpu-m3-max), not every catalog device.
	if rects != 5 {
		t.Errorf("want 5 bars (host ceiling, host measured, 3 devices), got %d", rects)
	}
	all := strings.Join(texts, "")
	for _, want := range []string{"measured 38.10 / 61.63 (62%)", "x86-laptop", "apple-a18", "loading <weights> & shards",
		"error:  shard | 3 ```missing```", "stand-in: gguf-quantize:q2_k, perplexity:q2_k"} {
		if !strings.Contains(all, want) {
			t.Errorf("report.html's text lacks %q", want)
		}
	}
}

// Text from tool logs reaches the page as text, never as markup.
func TestHTMLEscapesMessages(t *testing.T) {
	r := sample()
	r.Failures = append(r.Failures, Failure{Message: `<script>alert("x")</script>`})
	page, err := HTML(r)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(page, []byte("<script>")) {
		t.Errorf("a message's markup reached the page unescaped")
	}
	if !bytes.Contains(page, []byte("&lt;script&gt;")) {
		t.Errorf("the message is missing from the page")
	}
	md := Markdown(r)
	if bytes.Contains(md, []byte("<script>")) {
		t.Errorf("a message's markup reached report.md unescaped")
	}
}

// A ceiling is bandwidth / size in GB, and the host's row carries what the
// bench measured.
func TestCeilings(t *testing.T) {
	rows := sample().Targets[0].Ceilings()
	if !rows[0].Host || rows[0].CeilingTokS != 61.63 || *rows[0].MeasuredTokS != 38.1 {
		t.Errorf("host row = %+v", rows[0])
	}
	a18, _ := catalog.Lookup("apple-a18")
	for _, r := range rows[1:] {
		if r.Device == "apple-a18" {
			want := a18.MemoryBandwidthGBs / 0.105472
			if d := r.CeilingTokS - want; d > 1e-9 || d < -1e-9 {
				t.Errorf("apple-a18 ceiling %v, want %v", r.CeilingTokS, want)
			}
		}
		if r.Target != (r.Device == "x86-laptop") {
			t.Errorf("row %s: Target = %v", r.Device, r.Target)
		}
	}
	if (Target{Name: "x"}).Ceilings() != nil {
		t.Error("a target without a size has no ceilings")
	}
}

func TestMarkdownCellsCannotBreakTheTable(t *testing.T) {
	if got := MDText("a|b\nc <d>"); got != `a\|b c &lt;d&gt;` {
		t.Errorf("mdText: %q", got)
	}
	if got := MDCode("x`|y"); got != `x'\|y` {
		t.Errorf("mdCode: %q", got)
	}
}

// Both reports carry the run's date, version, source and revision, the
// baseline, links to the manifest and logs, and round top-1 agreement
// the same way.
func TestReportsAgree(t *testing.T) {
	md := string(Markdown(sample()))
	page, err := HTML(sample())
	if err != nil {
		t.Fatal(err)
	}
	line := "run 2026-12-02 07:30 UTC; edgepipe 0.1.0-dev; source hf://HuggingFaceTB/SmolLM2-135M-Instruct@main at 12fd25f77366fa6b3b4b768ec3050bf629380bac"
	for _, want := range []string{line, "87.3%"} {
		if !strings.Contains(md, want) || !strings.Contains(string(page), want) {
			t.Errorf("%q is not in both reports", want)
		}
	}
	for _, want := range []string{`<td class="n">24.313</td>`, `<a href="laptop-q4km/manifest.json">manifest.json</a>`,
		`<a class="id" href="laptop-q4km/logs/gguf-quantize_q4_k_m.log">gguf-quantize_q4_k_m.log</a>`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
}

// A target's decode check is one short cell in both reports; a report
// without one has no such column.
func TestGenerationCell(t *testing.T) {
	page, err := HTML(sample())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "<th>Generation</th>") || !strings.Contains(string(page), `<td class="n">93.1% / KL 0.044</td>`) {
		t.Errorf("report.html has no generation cell")
	}
	r := sample()
	for i := range r.Targets {
		r.Targets[i].Generation = nil
	}
	page, err = HTML(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(page), "Generation") || strings.Contains(string(Markdown(r)), "Generation") {
		t.Errorf("a report without decode checks shows a Generation column")
	}
	if got := GenerationCell(&manifest.Generation{TokenAgreement: 0.5}); got != "50.0% / KL -" {
		t.Errorf("no KL: %q", got)
	}
}
