package shared

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps"
)

// decodeFake is a steps.Context whose tools do not run: Exec records each
// argv, leaves files in Out, and appends the tool's report to the log.
type decodeFake struct {
	sc     *steps.Context
	argv   [][]string
	report string
	writes map[string]string
}

func newDecodeFake(t *testing.T, params any, inputs ...steps.Input) *decodeFake {
	t.Helper()
	dir := t.TempDir()
	f := &decodeFake{writes: map[string]string{}}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "step.log")
	f.sc = &steps.Context{StepID: "step", Params: params, Inputs: inputs, Out: out, Scratch: dir,
		Tool: func(name string) ([]string, error) { return []string{"/opt/tools/" + name}, nil },
		Exec: func(_ context.Context, argv []string, _ []string) error {
			f.argv = append(f.argv, argv)
			for name, b := range f.writes {
				if err := os.WriteFile(filepath.Join(out, name), []byte(b), 0o644); err != nil {
					return err
				}
			}
			return os.WriteFile(log, []byte("working\n"+f.report+"\n"), 0o644)
		},
		Data:   func(role string) (string, error) { return "/data/" + role, nil },
		Result: &steps.Result{}, LogPath: log, Log: io.Discard, Threads: 3}
	return f
}

// decodeReport is a decode helper's report: the llmcompressor family's
// golden, edited by change.
func decodeReport(t *testing.T, change func(m map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile("../llmcompressor/python/reports/llmc_decode.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func referenceInput(sequences, maxNew int) steps.Input {
	return steps.Input{StepID: "generate:reference", Kind: "generate-reference", Dir: "/cache/ref",
		Result: &steps.Result{Files: map[string]string{"reference": ReferenceFile},
			Metrics: map[string]float64{"sequences": float64(sequences), "max_new_tokens": float64(maxNew)}}}
}

var defaultBounds = DecodeParams{MaxNewTokens: 64, MinTokenAgreement: 0.5, MaxMeanKL: 1}

var testBound = DecodeBound{MaxAbs: 1e-3, MinTop1: 0.99}

func checkNamed(res *steps.Result, name string) (steps.Check, bool) {
	for _, c := range res.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return steps.Check{}, false
}

// The helper gets the artifact's arguments, the reference file and the
// step's threads; its report becomes the step's Generation and two
// passing checks.
func TestRunDecodeArgvAndRecord(t *testing.T) {
	p := defaultBounds
	f := newDecodeFake(t, &p, referenceInput(4, 64))
	f.report = decodeReport(t, nil)
	if err := RunDecode(context.Background(), f.sc, Decode{Tool: "x_decode.py", Args: []string{"--model", "/cache/model"}, Bound: testBound}); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/x_decode.py", "--model", "/cache/model", "--reference", "/cache/ref/reference.json", "--threads", "3"}
	if len(f.argv) != 1 || !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q, want %q", f.argv, want)
	}
	g := f.sc.Result.Generation
	if g == nil || g.Sequences != 4 || g.Steps != 173 || g.TokenAgreement < 0.93 || g.MeanKL == nil || *g.MeanKL > 0.05 ||
		g.DecodeMaxAbs == nil || *g.DecodeMaxAbs > 1e-4 || g.DecodeBound == nil || *g.DecodeBound != 1e-3 || g.DecodeMinTop1 == nil ||
		g.FirstDivergence == nil || *g.FirstDivergence != 2 || g.StopsLikeOriginal == nil || !*g.StopsLikeOriginal ||
		g.MinTokenAgreement != 0.5 || g.MaxMeanKL != 1 || !strings.Contains(g.Runtime, "compressed-tensors") {
		t.Fatalf("generation %+v", g)
	}
	for _, name := range []string{"decode consistency", "generation agreement"} {
		if c, ok := checkNamed(f.sc.Result, name); !ok || !c.Passed {
			t.Errorf("check %s: %+v", name, c)
		}
	}
	if c, _ := checkNamed(f.sc.Result, "generation agreement"); !strings.Contains(c.Detail, "first divergence at step 2") ||
		!strings.Contains(c.Detail, "stops at EOS where the original did") {
		t.Errorf("detail %q", c.Detail)
	}
}

// Each bound, crossed, fails its own check (and only that one); numbers
// the helper could not give (null: not finite) fail too.
func TestRecordDecodeBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		change   func(m map[string]any)
		params   DecodeParams
		failing  string
		inDetail string
	}{
		{"a cache one position off", func(m map[string]any) { m["decode_max_abs"] = 4.7; m["decode_top1"] = 0.41 }, defaultBounds,
			"decode consistency", "max |logit difference| 4.7 (bound 0.001), same top-1 41.0% (min 99.0%)"},
		{"top-1 alone", func(m map[string]any) { m["decode_top1"] = 0.95 }, defaultBounds, "decode consistency", "same top-1 95.0%"},
		{"not finite", func(m map[string]any) { m["decode_max_abs"] = nil }, defaultBounds, "decode consistency", "not finite"},
		{"agreement under the recipe's", nil, DecodeParams{MaxNewTokens: 64, MinTokenAgreement: 0.95, MaxMeanKL: 1},
			"generation agreement", "token agreement 93.1% (min 95.0%)"},
		{"KL over the recipe's", nil, DecodeParams{MaxNewTokens: 64, MinTokenAgreement: 0.5, MaxMeanKL: 0.01},
			"generation agreement", "mean KL 0.0442 (max 0.01)"},
		{"KL not finite", func(m map[string]any) { m["mean_kl"] = nil }, defaultBounds, "generation agreement", "not finite"},
	} {
		var rep report.Decode
		if err := steps.DecodeReport("x_decode.py", []byte(decodeReport(t, tc.change)), &rep); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		res := &steps.Result{}
		if err := RecordDecode(res, rep, tc.params, testBound); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, c := range res.Checks {
			if c.Passed == (c.Name == tc.failing) {
				t.Errorf("%s: check %s passed=%v: %s", tc.name, c.Name, c.Passed, c.Detail)
			}
			if c.Name == tc.failing && !strings.Contains(c.Detail, tc.inDetail) {
				t.Errorf("%s: detail %q, want %q", tc.name, c.Detail, tc.inDetail)
			}
		}
		if len(res.Checks) != 2 || res.Generation == nil {
			t.Errorf("%s: %d checks, generation %+v", tc.name, len(res.Checks), res.Generation)
		}
	}
}

// A runtime with no KV-cache decode says so: its consistency is recorded
// as not applicable, and only the generation agreement is judged.
func TestRecordDecodeNotApplicable(t *testing.T) {
	var rep report.Decode
	line := decodeReport(t, func(m map[string]any) {
		m["decode_max_abs"], m["decode_top1"], m["not_applicable"] = nil, nil, "the package is a stateless prefill program"
	})
	if err := steps.DecodeReport("x_decode.py", []byte(line), &rep); err != nil {
		t.Fatal(err)
	}
	res := &steps.Result{}
	if err := RecordDecode(res, rep, defaultBounds, testBound); err != nil {
		t.Fatal(err)
	}
	if len(res.Checks) != 1 || res.Checks[0].Name != "generation agreement" || res.Generation.NotApplicable == "" ||
		res.Generation.DecodeBound != nil || !strings.Contains(res.Facts["decode_consistency"], "not applicable: the package") {
		t.Errorf("checks %+v, generation %+v, facts %v", res.Checks, res.Generation, res.Facts)
	}
}

// What the plan or the helper got wrong is an error, not a verdict.
func TestRunDecodeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params DecodeParams
		ref    steps.Input
		change func(m map[string]any)
		want   string
	}{
		{"no tokens", DecodeParams{MaxNewTokens: 0, MaxMeanKL: 1}, referenceInput(4, 64), nil, "max_new_tokens must be at least 1"},
		{"agreement over 1", DecodeParams{MaxNewTokens: 64, MinTokenAgreement: 1.5, MaxMeanKL: 1}, referenceInput(4, 64), nil, "min_token_agreement must be a fraction"},
		{"negative KL", DecodeParams{MaxNewTokens: 64, MaxMeanKL: -1}, referenceInput(4, 64), nil, "max_mean_kl must be a finite number"},
		{"another reference length", defaultBounds, referenceInput(4, 32), nil, "generated up to 32 tokens a sequence, this check was planned for 64"},
		{"sequences missing", defaultBounds, referenceInput(5, 64), nil, "decoded 4 sequences of at most 64 tokens, the reference generate:reference has 5"},
		{"nothing compared", defaultBounds, referenceInput(0, 64), func(m map[string]any) { m["sequences"], m["steps"] = 0, 0 }, "nothing was checked"},
	} {
		p := tc.params
		f := newDecodeFake(t, &p, tc.ref)
		f.report = decodeReport(t, tc.change)
		err := RunDecode(context.Background(), f.sc, Decode{Tool: "x_decode.py", Args: []string{"--model", "m"}, Bound: testBound})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// A report that does not match the type is refused by name.
	p := defaultBounds
	f := newDecodeFake(t, &p, referenceInput(4, 64))
	f.report = decodeReport(t, func(m map[string]any) { delete(m, "mean_kl") })
	if err := RunDecode(context.Background(), f.sc, Decode{Tool: "x_decode.py", Bound: testBound}); err == nil || !strings.Contains(err.Error(), "missing field(s) mean_kl") {
		t.Errorf("a report without mean_kl: %v", err)
	}
}

// The reference step: its argv, and what it records of the report.
func TestGenerateReferenceArgvAndRecord(t *testing.T) {
	p := GenerateParams{MaxNewTokens: 64}
	f := newDecodeFake(t, &p, steps.Input{StepID: "source", Kind: "fetch", Dir: "/cache/src"})
	b, err := os.ReadFile("python/reports/generate_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	f.report = strings.TrimSpace(string(b))
	f.writes[ReferenceFile] = `{"sequences": []}`
	if err := GenerateReference.Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/generate_reference.py", "--model", "/cache/src", "--prompts", "/data/prompts", "--out", f.sc.Out,
		"--max-new-tokens", "64", "--text", "/data/eval", "--threads", "3"}
	if len(f.argv) != 1 || !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q, want %q", f.argv, want)
	}
	res := f.sc.Result
	if res.Files["reference"] != ReferenceFile || res.Metrics["sequences"] != 4 || res.Metrics["max_new_tokens"] != 64 ||
		res.Metrics["stopped_at_eos"] != 2 || !strings.HasPrefix(res.Facts["chat_template"], "applied") || res.Facts["sliding_window"] != "" {
		t.Errorf("result %+v", res)
	}

	// A model without a chat template, with a sliding window the decode
	// did not cross: both are said.
	var rep report.GenerateReference
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	w, no := 512, false
	rep.ChatTemplate, rep.SlidingWindow, rep.CrossesWindow = false, &w, &no
	res = &steps.Result{}
	if err := RecordReference(res, f.sc.Out, rep, 64); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Facts["chat_template"], "skipped: the tokenizer has no chat template") ||
		!strings.Contains(res.Facts["sliding_window"], "do not cover the window") || res.Metrics["sliding_window"] != 512 {
		t.Errorf("facts %v metrics %v", res.Facts, res.Metrics)
	}
	// Another length than asked, or no file: refused.
	if err := RecordReference(&steps.Result{}, f.sc.Out, rep, 32); err == nil || !strings.Contains(err.Error(), "asked for at most 32") {
		t.Errorf("another length: %v", err)
	}
	if err := RecordReference(&steps.Result{}, t.TempDir(), rep, 64); err == nil || !strings.Contains(err.Error(), "wrote no reference.json") {
		t.Errorf("no file: %v", err)
	}
	p.MaxNewTokens = 0
	if err := GenerateReference.Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), "max_new_tokens must be at least 1") {
		t.Errorf("max_new_tokens 0: %v", err)
	}
}
