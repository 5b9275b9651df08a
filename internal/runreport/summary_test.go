package runreport

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/termstatus"
	"github.com/edgepipe/edgepipe/steps"
)

// The terminal summary of the scenario: every way a target ends, the
// bench line, and the failed step on stderr.
func TestWriteSummaryGolden(t *testing.T) {
	s := llmScenario(t)
	var stdout, stderr bytes.Buffer
	WriteSummary(&stdout, &stderr, s.pl, s.res, false)
	golden(t, "summary.golden.txt", stdout.Bytes(), map[string]string{"$OUT": s.out})
	if want := "failed: gguf-quantize:q4_0 (log: " + s.log + ")\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q (the gate failure is not a step's)", stderr.String(), want)
	}
}

// With colour, each verdict cell is painted in its colour, and "-" in
// the plain one so the column still lines up.
func TestWriteSummaryColour(t *testing.T) {
	s := llmScenario(t)
	var stdout, plain bytes.Buffer
	WriteSummary(&stdout, &bytes.Buffer{}, s.pl, s.res, true)
	WriteSummary(&plain, &bytes.Buffer{}, s.pl, s.res, false)
	out := stdout.String()
	for _, want := range []string{
		termstatus.Paint(true, termstatus.Green, "excellent"),
		termstatus.Paint(true, termstatus.Red, "fail"),
		termstatus.Paint(true, termstatus.Plain, "-"),
		termstatus.Paint(true, termstatus.Plain, "VERDICT"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	// Every row's ARTIFACT cell starts at the same character in both:
	// the escapes widen each verdict cell alike.
	for name, table := range map[string]string{"plain": plain.String(), "coloured": out} {
		starts := map[int]bool{}
		for _, l := range lines(table)[:6] { // the header and the five targets
			starts[artifactStart(l)] = true
		}
		if len(starts) != 1 {
			t.Errorf("the %s table's last column is ragged (starts at %v):\n%s", name, starts, table)
		}
	}
}

// artifactStart is the character where a summary row's last cell starts:
// after the last run of two spaces (the cells themselves hold single ones).
func artifactStart(row string) int {
	return len([]rune(row[:strings.LastIndex(row, "  ")+2]))
}

func TestWriteSummaryWithoutAResult(t *testing.T) {
	s := llmScenario(t)
	var stdout, stderr bytes.Buffer
	WriteSummary(&stdout, &stderr, s.pl, nil, false)
	if stdout.Len()+stderr.Len() != 0 {
		t.Errorf("wrote %q %q for a run that never started", stdout.String(), stderr.String())
	}
}

// A bench without the host bandwidth test has no ceiling line; one from a
// stand-in is marked as no measurement.
func TestWriteSummaryBenchStandIn(t *testing.T) {
	s := llmScenario(t)
	out := s.res.Outputs["bench:gguf-quantize:q4_k_m"]
	out.Result.StandIns = []string{"llama-bench"}
	out.Result.Bench.HostBandwidthGBs = nil
	var stdout bytes.Buffer
	WriteSummary(&stdout, &bytes.Buffer{}, s.pl, s.res, false)
	got := stdout.String()
	if !strings.Contains(got, "prompt 700 tok/s) [stand-in: not a measurement]\n") || strings.Contains(got, "host memory bandwidth") {
		t.Errorf("want a stand-in bench line and no ceiling:\n%s", got)
	}
}

const visionRecipe = `edgepipe: 1
name: digits
task: image-classification
model: {source: builtin:mobilenetv3-small-digits}
targets:
  fp32: {device: x86-laptop, format: onnx-fp32, quality: {accuracy: {max_drop: 0.01}}}
  int8: {device: x86-laptop, format: onnx-int8, bench: {}, quality: {agreement: {min: 0.9}}}
  both: {device: x86-laptop, format: onnx-int8, quality: {accuracy: {max_drop: 0.02}, agreement: {min: 0.99}}}
`

// An image classifier's summary: top-1 and its drop, agreement labelled
// as such, the failed agreement gate as the verdict, and the decision
// table beside.
func TestWriteSummaryVisionGolden(t *testing.T) {
	pl := loadPlan(t, visionRecipe)
	out := t.TempDir()
	publishFolder(t, filepath.Join(out, "fp32"), "fp32", map[string]string{"model.onnx": "w"},
		manifest.Manifest{Metrics: manifest.Metrics{SizeBytes: ptr[int64](6 << 20)}})
	publishFolder(t, filepath.Join(out, "int8"), "int8", map[string]string{"model.onnx": "w"}, manifest.Manifest{})
	vb := &manifest.VisionBench{Runtime: "onnxruntime", RuntimeVersion: "onnxruntime 1.20.1 CPUExecutionProvider", Threads: 2, Batch: 1,
		ModelBytes: 1600 << 10, LatencyP50MS: 1.5, LatencyP95MS: 1.75, LatencyP99MS: 2, ImagesPerS: 640, PeakRSSBytes: 90 << 20, RSSGrowthBytes: 1 << 20}
	res := &engine.RunResult{
		Outputs: map[string]*steps.Output{
			"vision-bench:vision-quantize:int8": {Result: &steps.Result{VisionBench: vb, StandIns: []string{"bench.py"}}},
		},
		Published: map[string]string{"fp32": filepath.Join(out, "fp32"), "int8": filepath.Join(out, "int8")},
		Accuracy: map[string]*publish.AccuracyResult{
			"fp32": {Target: "fp32", Reference: 0.95, Converted: 0.955, Drop: -0.005, MaxDrop: 0.01, Verdict: manifest.VerdictExcellent},
			"both": {Target: "both", Reference: 0.95, Converted: 0.94, Drop: 0.01, MaxDrop: 0.02, Verdict: manifest.VerdictOK},
		},
		Agreement: map[string]*publish.AgreementResult{
			"int8": {Target: "int8", Agreement: 0.97, Min: 0.9, Verdict: manifest.VerdictOK},
			"both": {Target: "both", Agreement: 0.98, Min: 0.99, Verdict: manifest.VerdictFail},
		},
	}
	var stdout, stderr bytes.Buffer
	WriteSummary(&stdout, &stderr, pl, res, false)
	golden(t, "summary-vision.golden.txt", stdout.Bytes(), map[string]string{"$OUT": out})
	if stderr.Len() != 0 {
		t.Errorf("stderr %q", stderr.String())
	}
}

// When every target gates on agreement alone, the columns say so and the
// cells need no label.
func TestWriteSummaryAgreementOnly(t *testing.T) {
	pl := loadPlan(t, `edgepipe: 1
name: digits
task: image-classification
model: {source: builtin:mobilenetv3-small-digits}
targets:
  int8: {device: x86-laptop, format: onnx-int8, quality: {agreement: {min: 0.9}}}
`)
	res := &engine.RunResult{Published: map[string]string{},
		Agreement: map[string]*publish.AgreementResult{"int8": {Agreement: 0.875, Min: 0.9, Verdict: manifest.VerdictFail}}}
	var stdout bytes.Buffer
	WriteSummary(&stdout, &bytes.Buffer{}, pl, res, false)
	want := "TARGET  FORMAT     SIZE  AGREEMENT  MIN         VERDICT  ARTIFACT\n" +
		"int8    onnx-int8  -     87.50%     min 90.00%  fail     not published (gate failed)\n"
	if !strings.HasPrefix(stdout.String(), want) {
		t.Errorf("got:\n%s\nwant it to start:\n%s", stdout.String(), want)
	}
	if !agreementOnly(pl) || agreementOnly(loadPlan(t, visionRecipe)) || agreementOnly(loadPlan(t, llmRecipe)) {
		t.Error("agreementOnly is true only for the recipe whose every target gates on agreement alone")
	}
}
