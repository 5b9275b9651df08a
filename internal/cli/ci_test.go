package cli

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/report"
	"github.com/edgepipe/edgepipe/internal/runreport"
	"github.com/spf13/pflag"

	"github.com/edgepipe/edgepipe/internal/engine"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/event"

	"go.yaml.in/yaml/v3"

	"github.com/edgepipe/edgepipe/internal/recipe"
)

func testPlan(t *testing.T, src string) *plan.Plan {
	t.Helper()
	r, err := recipe.Parse("recipe.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Expand(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A step that fails upstream of targets: they are skipped test cases that
// name it, and the step itself is an error case carrying its log.
func TestReportsOfAFailedSharedStep(t *testing.T) {
	pl := testPlan(t, `edgepipe: 1
name: shared
model: {source: ./model}
targets:
  a: {device: x86-laptop, format: gguf-q4_k_m}
  b: {device: x86-laptop, format: gguf-q8_0}
`)
	log := filepath.Join(t.TempDir(), "convert.log")
	if err := os.WriteFile(log, []byte("loading\nerror: tensor\x01 blk.0 | has no data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := runreport.New(pl)
	c.Event(event.Event{Type: event.Cached, Step: plan.SourceStepID})
	c.Event(event.Event{Type: event.Started, Step: "gguf-convert:f16", Kind: "gguf-convert", Path: log})
	c.Event(event.Event{Type: event.Failed, Step: "gguf-convert:f16", Kind: "gguf-convert", Seconds: 2, Message: "convert_hf_to_gguf.py exited with code 1", Path: log})
	stepErr := &engine.StepError{Step: "gguf-convert:f16", LogPath: log, Err: errors.New("convert_hf_to_gguf.py exited with code 1")}
	res := &engine.RunResult{Published: map[string]string{}, Gates: map[string]*publish.GateResult{},
		Failed: []error{stepErr}, Skipped: []string{"publish:a", "publish:b"}}

	outcomes := c.Outcomes(res)
	for _, o := range outcomes {
		if o.Outcome != runreport.OutcomeBlocked || len(o.FailedSteps) != 1 || o.FailedSteps[0] != "gguf-convert:f16" {
			t.Errorf("target %s: outcome %s, failed steps %v; want blocked by gguf-convert:f16", o.Target, o.Outcome, o.FailedSteps)
		}
	}

	var doc struct {
		Tests   int `xml:"tests,attr"`
		Skipped int `xml:"skipped,attr"`
		Errors  int `xml:"errors,attr"`
		Suites  []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name      string `xml:"name,attr"`
				Classname string `xml:"classname,attr"`
				Skipped   *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
				Error *struct {
					Message string `xml:"message,attr"`
					Type    string `xml:"type,attr"`
					Text    string `xml:",chardata"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	junitXML := c.JUnit(outcomes, Version)
	if err := xml.Unmarshal(junitXML, &doc); err != nil {
		t.Fatalf("the JUnit report does not parse: %v\n%s", err, junitXML)
	}
	if doc.Tests != 3 || doc.Skipped != 2 || doc.Errors != 1 || len(doc.Suites) != 1 || doc.Suites[0].Name != "shared" {
		t.Fatalf("want one suite \"shared\" with 3 tests, 2 skipped, 1 error:\n%s", junitXML)
	}
	cases := doc.Suites[0].Cases
	for _, tc := range cases[:2] {
		if tc.Classname != "shared.gate" || tc.Skipped == nil || tc.Skipped.Message != "not built: step gguf-convert:f16 failed" {
			t.Errorf("gate case %s: want a skipped shared.gate case naming the failed step:\n%s", tc.Name, junitXML)
		}
	}
	step := cases[2]
	if step.Name != "gguf-convert:f16" || step.Classname != "shared.step" || step.Error == nil ||
		step.Error.Message != "convert_hf_to_gguf.py exited with code 1" || step.Error.Type != "step-failed" {
		t.Fatalf("want an error case for the failed step:\n%s", junitXML)
	}
	// The log's tail is in the body, less the control character XML
	// cannot hold.
	if !strings.Contains(step.Error.Text, "error: tensor blk.0 | has no data") {
		t.Errorf("the step's case should carry its log's last lines, got %q", step.Error.Text)
	}

	code := runExitCode(runError(res, stepErr))
	md := string(report.Markdown(c.Report(outcomes, res, code, exitMeaning[code])))
	for _, want := range []string{
		"0 of 2 targets published; exit code 1 (a step failed).",
		"| a | `gguf-q4_k_m` | x86-laptop | - | - | - | - | not published (upstream failed) |",
		"- **step gguf-convert:f16**: step gguf-convert:f16 failed: convert_hf_to_gguf.py exited with code 1",
		"  error: tensor blk.0 | has no data", // inside a code block: no escapes
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the summary lacks %q:\n%s", want, md)
		}
	}
}

// Without a run result (the run never started) every target is "not run",
// and every report still renders.
func TestReportsWithoutAResult(t *testing.T) {
	pl := testPlan(t, `edgepipe: 1
name: x
model: {source: ./model}
targets:
  a: {device: x86-laptop, format: gguf-q8_0}
`)
	c := runreport.New(pl)
	var stdout, stderr bytes.Buffer
	summary := filepath.Join(t.TempDir(), "summary.md")
	env := &Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string {
		if k == "GITHUB_STEP_SUMMARY" {
			return summary
		}
		return ""
	}}
	interrupted := &ExitError{Code: ExitInterrupted, Err: errors.New("interrupted")}
	if err := finish(c, env, filepath.Join(t.TempDir(), "j.xml"), true, nil, interrupted); err != interrupted {
		t.Fatalf("finish returned %v, want the run's own error", err)
	}
	md, _ := os.ReadFile(summary)
	if !strings.Contains(string(md), "exit code 130 (interrupted)") || !strings.Contains(string(md), "| not published |") {
		t.Errorf("summary:\n%s", md)
	}
	if !strings.Contains(stdout.String(), `"event":"run-finished","recipe":"x","exit_code":130`) ||
		!strings.Contains(stdout.String(), `"outcome":"not-run"`) {
		t.Errorf("--json closing line: %s", stdout.String())
	}
}

// pendingFlags are flags the example workflow uses before this build has
// them, with the work that adds them.
var pendingFlags = map[string]string{}

// The example workflow's edgepipe commands use flags edgepipe has, and it
// caches and uploads what docs/ci.md says it does.
func TestExampleWorkflow(t *testing.T) {
	data, err := os.ReadFile("../../docs/github-actions.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Uses string         `yaml:"uses"`
				Run  string         `yaml:"run"`
				With map[string]any `yaml:"with"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatalf("docs/github-actions.yml: %v", err)
	}
	flags := map[string]bool{}
	root := newRoot(&Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }})
	for _, c := range root.Commands() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			flags[c.Name()+" --"+f.Name] = true
			if f.Shorthand != "" {
				flags[c.Name()+" -"+f.Shorthand] = true
			}
		})
	}
	uses := map[string]map[string]any{}
	var uploads []any
	ran := 0
	for _, job := range wf.Jobs {
		for _, st := range job.Steps {
			if st.Uses != "" {
				name, _, _ := strings.Cut(st.Uses, "@")
				uses[name] = st.With
				if name == "actions/upload-artifact" {
					uploads = append(uploads, st.With["path"])
				}
			}
			for _, line := range strings.Split(st.Run, "\n") {
				words := strings.Fields(line)
				if len(words) < 2 || words[0] != "edgepipe" {
					continue
				}
				ran++
				cmd := words[1]
				for _, w := range words[2:] {
					if !strings.HasPrefix(w, "-") {
						continue
					}
					flag, _, _ := strings.Cut(w, "=")
					key := cmd + " " + flag
					if why, pending := pendingFlags[key]; pending {
						if flags[key] {
							t.Errorf("edgepipe %s has %s now (%s): remove it from pendingFlags", cmd, flag, why)
						}
						continue
					}
					if !flags[key] {
						t.Errorf("the workflow runs `%s`, but edgepipe %s has no flag %s", line, cmd, flag)
					}
				}
			}
		}
	}
	if ran < 3 {
		t.Fatalf("found %d edgepipe commands in the workflow; the test reads it wrong", ran)
	}
	for _, a := range []string{"restore", "save"} {
		p, _ := uses["actions/cache/"+a]["path"].(string)
		if lines := strings.Fields(p); len(lines) == 0 || lines[0] != "~/.cache/edgepipe" {
			t.Errorf("the workflow's cache %s has path %q, want the edgepipe cache ~/.cache/edgepipe first", a, p)
		}
	}
	if key, _ := uses["actions/cache/restore"]["key"].(string); !strings.Contains(key, "hashFiles(env.RECIPE)") {
		t.Errorf("the cache key %q should hash the recipe", key)
	}
	if !slices.Contains(uploads, any("artifacts/")) {
		t.Errorf("the workflow uploads %v, not the artifacts/ folder", uploads)
	}
}
