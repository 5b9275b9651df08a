package runreport

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/steps"
)

// Each target of the scenario ends the way its run did, and says why.
func TestOutcomes(t *testing.T) {
	s := llmScenario(t)
	got := map[string]Outcome{}
	var order []string
	for _, o := range s.rec.Outcomes(s.res) {
		got[o.Target] = o
		order = append(order, o.Target)
	}
	if want := []string{"a", "b", "c", "d", "e"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("outcomes in order %v, want the recipe's %v", order, want)
	}

	a := got["a"]
	if a.Outcome != OutcomePublished || a.Verdict != manifest.VerdictExcellent || a.Gate != s.res.Gates["a"] ||
		a.Artifact != filepath.Join(s.out, "a") || a.SizeBytes != 3<<20 || a.Error != "" {
		t.Errorf("a: %+v; want published, excellent, its folder and the manifest's size", a)
	}
	if !reflect.DeepEqual(a.Pushed, []string{"oci://registry.example/llm:a@sha256:1111"}) ||
		!reflect.DeepEqual(a.PushFailed, []string{"s3://bucket/llm/a"}) {
		t.Errorf("a: pushed %v, push failed %v", a.Pushed, a.PushFailed)
	}
	if a.Device != "x86-laptop" || a.Format != "gguf-q4_k_m" {
		t.Errorf("a: device %q format %q", a.Device, a.Format)
	}

	b := got["b"]
	if b.Outcome != OutcomeGateFailed || b.Verdict != manifest.VerdictFail || b.Artifact != "" ||
		!strings.HasPrefix(b.Error, "target b failed its quality gate: perplexity 13.0000 against baseline 10.0000") {
		t.Errorf("b: %+v; want gate-failed with the gate's sentence", b)
	}
	if len(b.Pushed)+len(b.PushFailed) != 0 {
		t.Errorf("b: pushes %v %v belong to a", b.Pushed, b.PushFailed)
	}

	c := got["c"]
	if c.Outcome != OutcomeNotRun || c.StoppedBy != "gguf-quantize:q4_0" ||
		c.Error != "not run (stopped after gguf-quantize:q4_0 failed)" || len(c.FailedSteps) != 0 {
		t.Errorf("c: %+v; want not-run, stopped by d's failed step", c)
	}

	d := got["d"]
	if d.Outcome != OutcomeBlocked || !reflect.DeepEqual(d.FailedSteps, []string{"gguf-quantize:q4_0"}) ||
		d.Error != "not built: step gguf-quantize:q4_0 failed" {
		t.Errorf("d: %+v; want blocked by its quantize step", d)
	}

	if e := got["e"]; e.Outcome != OutcomeNotRun || e.Error != "" || e.StoppedBy != "" || e.Verdict != "" {
		t.Errorf("e: %+v; want a bare not-run", e)
	}
}

// Without a result (the run never started) every target is not-run, and
// nothing else is claimed about it.
func TestOutcomesWithoutAResult(t *testing.T) {
	s := llmScenario(t)
	for _, o := range s.rec.Outcomes(nil) {
		if o.Outcome != OutcomeNotRun || o.Gate != nil || o.Error != "" || o.Pushed != nil {
			t.Errorf("%s: %+v, want a bare not-run", o.Target, o)
		}
	}
}

// A gate error with no gate result still fails the target's verdict, and
// one for another target does not touch this one.
func TestOutcomeGateErrorWithoutVerdict(t *testing.T) {
	s := llmScenario(t)
	check := &publish.GateError{Target: "e", Step: "publish:e", Check: &steps.Check{Name: "loads", Detail: "llama-cli exited 1"}}
	res := &engine.RunResult{Published: map[string]string{}, Failed: []error{check}}
	for _, o := range s.rec.Outcomes(res) {
		switch o.Target {
		case "e":
			if o.Outcome != OutcomeGateFailed || o.Verdict != manifest.VerdictFail || !strings.Contains(o.Error, `check "loads" of step publish:e failed`) {
				t.Errorf("e: %+v", o)
			}
		case "d":
			// Its step failed in the recorder: blocked, not gate-failed.
			if o.Outcome != OutcomeBlocked {
				t.Errorf("d: %+v", o)
			}
		default:
			if o.Outcome != OutcomeNotRun {
				t.Errorf("%s: %+v, want not-run: the gate error is e's", o.Target, o)
			}
		}
	}
}

// An image classifier's verdict: agreement over a perplexity gate, and a
// failed accuracy gate over either; a passing accuracy gate is kept
// without taking the verdict from a failed agreement gate.
func TestOutcomeVerdictOfTwoGates(t *testing.T) {
	pl := loadPlan(t, `edgepipe: 1
name: digits
task: image-classification
model: {source: builtin:mobilenetv3-small-digits}
targets:
  int8: {device: x86-laptop, format: onnx-int8}
`)
	acc := func(v string) *publish.AccuracyResult { return &publish.AccuracyResult{Target: "int8", Verdict: v} }
	agr := func(v string) *publish.AgreementResult { return &publish.AgreementResult{Target: "int8", Verdict: v} }
	for _, tc := range []struct {
		name     string
		accuracy *publish.AccuracyResult
		agree    *publish.AgreementResult
		want     string
	}{
		{"accuracy alone", acc("ok"), nil, "ok"},
		{"agreement alone", nil, agr("excellent"), "excellent"},
		{"both pass: agreement's", acc("ok"), agr("excellent"), "excellent"},
		{"accuracy fails", acc("fail"), agr("excellent"), "fail"},
		{"agreement fails", acc("excellent"), agr("fail"), "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &engine.RunResult{Published: map[string]string{}, Accuracy: map[string]*publish.AccuracyResult{},
				Agreement: map[string]*publish.AgreementResult{}}
			if tc.accuracy != nil {
				res.Accuracy["int8"] = tc.accuracy
			}
			if tc.agree != nil {
				res.Agreement["int8"] = tc.agree
			}
			o := New(pl).Outcomes(res)[0]
			if o.Verdict != tc.want || o.Accuracy != tc.accuracy || o.Agreement != tc.agree {
				t.Errorf("verdict %q (accuracy %v, agreement %v), want %q with both results kept", o.Verdict, o.Accuracy, o.Agreement, tc.want)
			}
		})
	}
}

// A target is blocked by the failed steps it needs, in plan order
// whatever order they failed in, and not by one only another target needs.
func TestBlockedByUpstreamInPlanOrder(t *testing.T) {
	s := llmScenario(t)
	rec := New(s.pl)
	rec.Event(event.Event{Type: event.Failed, Step: "perplexity:q8_0"})
	rec.Event(event.Event{Type: event.Failed, Step: "gguf-convert:f16"})
	rec.Event(event.Event{Type: event.Failed, Step: "bench:gguf-quantize:q4_k_m"})
	// A step that failed and then finished on a retry no longer counts.
	rec.Event(event.Event{Type: event.Failed, Step: "gguf-quantize:q4_1"})
	rec.Event(event.Event{Type: event.Finished, Step: "gguf-quantize:q4_1"})
	res := &engine.RunResult{Published: map[string]string{}}
	want := map[string][]string{
		"a": {"gguf-convert:f16", "bench:gguf-quantize:q4_k_m"},
		"b": {"gguf-convert:f16", "perplexity:q8_0"},
		"c": {"gguf-convert:f16"},
		"d": {"gguf-convert:f16"},
		"e": {"gguf-convert:f16"},
	}
	for _, o := range rec.Outcomes(res) {
		if o.Outcome != OutcomeBlocked || !reflect.DeepEqual(o.FailedSteps, want[o.Target]) {
			t.Errorf("%s: %s by %v, want blocked by %v", o.Target, o.Outcome, o.FailedSteps, want[o.Target])
		}
	}
	if got, want := rec.failedSteps(), []string{"gguf-convert:f16", "bench:gguf-quantize:q4_k_m", "perplexity:q8_0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("failed steps %v, want %v (plan order)", got, want)
	}
}

// Events without a step, and the remarks and pushes that follow a step's
// end, leave its record as it was.
func TestEventRecords(t *testing.T) {
	s := llmScenario(t)
	rec := New(s.pl)
	rec.Event(event.Event{Type: event.Failed, Message: "no step"})
	if len(rec.steps) != 0 {
		t.Fatalf("an event without a step made records: %v", rec.steps)
	}
	rec.Event(event.Event{Type: event.Started, Step: "x", Kind: "bench", Path: "/logs/x.log"})
	rec.Event(event.Event{Type: event.Failed, Step: "x", Seconds: 3, Message: "boom"})
	rec.Event(event.Event{Type: event.Gate, Step: "x", Message: "fail"})
	rec.Event(event.Event{Type: event.Log, Step: "x", Message: "a remark"})
	rec.Event(event.Event{Type: event.Pushed, Step: "x", Target: "t", Path: "oci://one"})
	rec.Event(event.Event{Type: event.Pushed, Step: "x", Target: "t", Path: "oci://two"})
	want := stepRecord{kind: "bench", status: event.Failed, seconds: 3, message: "boom", log: "/logs/x.log"}
	if got := *rec.steps["x"]; got != want {
		t.Errorf("record %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(rec.pushed["t"], []string{"oci://one", "oci://two"}) {
		t.Errorf("pushed %v", rec.pushed["t"])
	}
	// A failure's own log replaces the started one; an event without
	// seconds keeps the last measured.
	rec.Event(event.Event{Type: event.Failed, Step: "x", Message: "again", Path: "/logs/x.2.log"})
	want.message, want.log = "again", "/logs/x.2.log"
	if got := *rec.steps["x"]; got != want {
		t.Errorf("record %+v, want %+v", got, want)
	}
}

var suiteTime = regexp.MustCompile(`(<testsuites? [^>]*)time="[0-9.]+"( timestamp="[0-9T:-]+")?`)

// The JUnit report, with the suite's own times (which depend on when the
// test ran) masked.
func TestJUnitGolden(t *testing.T) {
	s := llmScenario(t)
	got := s.rec.JUnit(s.rec.Outcomes(s.res), "1.2.3")
	if !suiteTime.Match(got) {
		t.Fatalf("no suite time to mask in:\n%s", got)
	}
	masked := suiteTime.ReplaceAll(got, []byte(`${1}time="T"${2}`))
	masked = regexp.MustCompile(`timestamp="[0-9T:-]+"`).ReplaceAll(masked, []byte(`timestamp="TS"`))
	golden(t, "junit.golden.xml", masked, map[string]string{"$OUT": s.out})
}

// The report parses as the schema CI readers expect, and its counts agree
// with its cases.
func TestJUnitCounts(t *testing.T) {
	s := llmScenario(t)
	type counts struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Skipped  int `xml:"skipped,attr"`
	}
	var doc struct {
		counts
		Suites []struct {
			counts
			Name       string `xml:"name,attr"`
			Timestamp  string `xml:"timestamp,attr"`
			Properties []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"properties>property"`
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Error   *struct{} `xml:"error"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	data := s.rec.JUnit(s.rec.Outcomes(s.res), "1.2.3")
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("does not parse: %v\n%s", err, data)
	}
	if len(doc.Suites) != 1 {
		t.Fatalf("%d suites, want 1", len(doc.Suites))
	}
	su := doc.Suites[0]
	var failures, errs, skipped int
	for _, c := range su.Cases {
		failures += btoi(c.Failure != nil)
		errs += btoi(c.Error != nil)
		skipped += btoi(c.Skipped != nil)
	}
	// a passes; b fails its gate; c, d, e are skipped; the quantize step
	// is the one error.
	if su.Name != "llm" || len(su.Cases) != 6 || su.Tests != 6 || failures != 1 || errs != 1 || skipped != 3 ||
		su.Failures != failures || su.Errors != errs || su.Skipped != skipped {
		t.Errorf("suite %s: %d cases, counts %d/%d/%d/%d; cases have %d failures, %d errors, %d skipped",
			su.Name, len(su.Cases), su.Tests, su.Failures, su.Errors, su.Skipped, failures, errs, skipped)
	}
	if doc.counts != su.counts {
		t.Errorf("the totals %+v do not repeat the suite's", doc)
	}
	if _, err := time.Parse("2006-01-02T15:04:05", su.Timestamp); err != nil {
		t.Errorf("timestamp %q: %v", su.Timestamp, err)
	}
	props := map[string]string{}
	for _, p := range su.Properties {
		props[p.Name] = p.Value
	}
	if props["recipe"] != "recipe.yaml" || props["edgepipe"] != "1.2.3" {
		t.Errorf("properties %v", props)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A failed step's case carries its log's last lines, unless its message
// already names the log (the tool's own error quotes it).
func TestJUnitStepLogTail(t *testing.T) {
	s := llmScenario(t)
	for _, tc := range []struct {
		name, message string
		wantTail      bool
	}{
		{"message without the log", "llama-quantize exited with code 1", true},
		{"message naming the log", "llama-quantize exited with code 1; see " + s.log, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := New(s.pl)
			rec.Event(event.Event{Type: event.Started, Step: "gguf-quantize:q4_0", Path: s.log})
			rec.Event(event.Event{Type: event.Failed, Step: "gguf-quantize:q4_0", Message: tc.message})
			got := string(rec.JUnit(nil, "v"))
			hasTail := strings.Contains(got, "last lines of "+s.log+":\nloading model\nerror: tensor blk.3 has no data")
			if hasTail != tc.wantTail {
				t.Errorf("log tail in the report: %v, want %v:\n%s", hasTail, tc.wantTail, got)
			}
			if strings.Contains(got, "\x07") {
				t.Errorf("the report holds a control character XML cannot:\n%q", got)
			}
		})
	}
	// Without a log, the case holds the message alone.
	rec := New(s.pl)
	rec.Event(event.Event{Type: event.Failed, Step: "gguf-quantize:q4_0", Message: "no tool\nsecond line"})
	got := string(rec.JUnit(nil, "v"))
	if !strings.Contains(got, `<error message="no tool" type="step-failed"><![CDATA[no tool`+"\nsecond line]]></error>") {
		t.Errorf("want the first line as the message and the whole as the body:\n%s", got)
	}
}

func TestXMLText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"tab\tnewline\ncr\r", "tab\tnewline\ncr\r"},
		{"bell\x07 nul\x00 esc\x1b[31m", "bell nul esc[31m"},
		{"noncharacters \uFFFE\uFFFF end", "noncharacters  end"},
		{"bad utf-8 \xff\xfe here", "bad utf-8  here"},
		{"ünïcödé ✓ \u00a0", "ünïcödé ✓ \u00a0"},
	} {
		if got := xmlText(tc.in); got != tc.want {
			t.Errorf("xmlText(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if err := xml.Unmarshal([]byte("<a>"+xmlEscape(xmlText(tc.in))+"</a>"), new(struct{})); err != nil {
			t.Errorf("xmlText(%q) does not parse as XML: %v", tc.in, err)
		}
	}
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// The closing line of --json names the recipe, the exit code, how long
// the run took and every outcome.
func TestFinished(t *testing.T) {
	s := llmScenario(t)
	s.rec.started = time.Now().Add(-90 * time.Second)
	outcomes := s.rec.Outcomes(s.res)
	f := s.rec.Finished(3, outcomes)
	if f.Type != "run-finished" || f.Recipe != "llm" || f.ExitCode != 3 || f.Seconds < 90 || f.Seconds > 3600 ||
		time.Since(f.Time) > time.Minute || !reflect.DeepEqual(f.Targets, outcomes) {
		t.Errorf("%+v", f)
	}
	line, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"event":"run-finished"`, `"exit_code":3`, `"target":"b","device":"x86-laptop","format":"gguf-q8_0","outcome":"gate-failed","verdict":"fail"`,
		`"stopped_by":"gguf-quantize:q4_0"`, `"failed_steps":["gguf-quantize:q4_0"]`, `"push_failed":["s3://bucket/llm/a"]`} {
		if !strings.Contains(string(line), want) {
			t.Errorf("the line lacks %s:\n%s", want, line)
		}
	}
}

func TestAppendFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summary.md")
	for _, part := range []string{"first\n", "second\n"} {
		if err := AppendFile(path, []byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := os.ReadFile(path); string(got) != "first\nsecond\n" {
		t.Errorf("got %q, want both parts in order", got)
	}
	if err := AppendFile(filepath.Join(t.TempDir(), "no", "such", "folder"), []byte("x")); err == nil {
		t.Error("appending into a missing folder succeeded")
	}
}

func TestRelPath(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	for _, tc := range []struct{ in, want string }{
		{filepath.Join(wd, "artifacts", "a"), filepath.Join("artifacts", "a")},
		{wd, "."},
		{outside, outside},
		{filepath.Dir(wd), filepath.Dir(wd)},
		{filepath.Join(filepath.Dir(wd), "..sibling"), filepath.Join(filepath.Dir(wd), "..sibling")},
	} {
		if got := RelPath(tc.in); got != tc.want {
			t.Errorf("RelPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A published target without a perplexity gate says so; its case passes.
func TestJUnitPublishedWithoutGate(t *testing.T) {
	s := llmScenario(t)
	got := string(New(s.pl).JUnit([]Outcome{{Target: "a", Format: "gguf-q4_k_m", Device: "x86-laptop", Outcome: OutcomePublished, Artifact: "out/a"}}, "v"))
	want := "<system-out><![CDATA[format gguf-q4_k_m on x86-laptop\npublished; the format has no perplexity gate\nartifact: out/a]]></system-out>"
	if !strings.Contains(got, want) || strings.Contains(got, "<failure") || strings.Contains(got, "<skipped") {
		t.Errorf("want a passing case saying there was no gate:\n%s", got)
	}
}
