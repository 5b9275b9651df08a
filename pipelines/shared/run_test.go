package shared

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/steps"
)

func TestRunStepThreads(t *testing.T) {
	for _, tt := range []struct {
		min, max, lo, hi int
	}{{0, 0, 1, 1}, {1, 2, 1, 2}, {2, 0, 2, 2}, {3, 2, 3, 3}} {
		r := runKind{}.Resources(&RunParams{MinThreads: tt.min, MaxThreads: tt.max})
		if r.MinCores != tt.lo || r.Cores != tt.hi {
			t.Errorf("min_threads %d max_threads %d: cores %d-%d, want %d-%d", tt.min, tt.max, r.MinCores, r.Cores, tt.lo, tt.hi)
		}
	}
}

func runStep(t *testing.T, argv []string, inputs ...steps.Input) (*fakeStep, error) {
	t.Helper()
	f := newFakeStep(t, &RunParams{Argv: argv}, inputs...)
	return f, runKind{}.Run(context.Background(), f.sc)
}

// ${NAME.outputs.ROLE} becomes the path of a need's output: "dir" is its
// folder, any other role a file its result names; a target's name stands
// for its publish step.
func TestRunExpandsOutputs(t *testing.T) {
	quant := steps.Input{StepID: "gguf-quantize:q4", Kind: "gguf-quantize", Dir: "/cache/q4",
		Result: &steps.Result{Files: map[string]string{"model": "model-q4.gguf"}}}
	pub := steps.Input{StepID: "publish:laptop", Kind: "publish", Dir: "/artifacts/laptop"}
	f, err := runStep(t, []string{"python3", "smoke.py", "${gguf-quantize:q4.outputs.model}", "--in=${laptop.outputs.dir}/x,${gguf-quantize:q4.outputs.dir}", "${NOT.outputs.model}"}, quant, pub)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"python3", "smoke.py", "/cache/q4/model-q4.gguf", "--in=/artifacts/laptop/x,/cache/q4", "${NOT.outputs.model}"}
	if len(f.argv) != 1 || !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q\nwant %q", f.argv, want)
	}
	if len(f.sc.Result.Argv) != 1 || !slices.Equal(f.sc.Result.Argv[0], want) {
		t.Errorf("recorded argv %q", f.sc.Result.Argv)
	}
	// User commands run where the recipe is.
	if f.sc.ExecDir != f.sc.RecipeDir {
		t.Errorf("ExecDir %q, want the recipe's folder %q", f.sc.ExecDir, f.sc.RecipeDir)
	}
	// The params are not rewritten: a retry expands them again.
	if p := steps.ParamsOf[RunParams](f.sc.Params); p.Argv[2] != "${gguf-quantize:q4.outputs.model}" {
		t.Errorf("the step's params changed: %q", p.Argv)
	}
}

func TestRunProgramPath(t *testing.T) {
	for argv0, want := range map[string]string{
		"python3":          "python3",
		"/usr/bin/env":     "/usr/bin/env",
		"./smoke.sh":       "smoke.sh",
		"scripts/smoke.sh": "scripts/smoke.sh",
	} {
		f, err := runStep(t, []string{argv0})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(argv0, "/") && !filepath.IsAbs(argv0) {
			want = filepath.Join(f.sc.RecipeDir, want)
		}
		if f.argv[0][0] != want {
			t.Errorf("%s runs as %s, want %s", argv0, f.argv[0][0], want)
		}
	}
}

func TestRunRefusals(t *testing.T) {
	quant := steps.Input{StepID: "q", Kind: "gguf-quantize", Dir: "/cache/q", Result: &steps.Result{}}
	for _, tc := range []struct {
		p       RunParams
		wantErr string
	}{
		{RunParams{}, "step step: with.argv must be a non-empty list"},
		{RunParams{Argv: []string{"x"}, MinThreads: -1}, "must not be negative (got -1 and 0)"},
		{RunParams{Argv: []string{"x"}, MaxThreads: -2}, "(got 0 and -2)"},
		{RunParams{Argv: []string{"x", "${q.outputs.model}"}}, `q has no output "model"`},
		{RunParams{Argv: []string{"x", "${other.outputs.dir}", "${q.outputs.model}"}}, "refers to ${other.outputs.dir} but does not need other: add it to needs"},
	} {
		p := tc.p
		f := newFakeStep(t, &p, quant)
		err := runKind{}.Run(context.Background(), f.sc)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.wantErr)
		}
		if len(f.argv) != 0 {
			t.Errorf("%+v: ran %q", tc.p, f.argv)
		}
	}
	// The command's own failure is the step's.
	f := newFakeStep(t, &RunParams{Argv: []string{"false"}})
	f.tool = func([]string) error { return errors.New("exit status 1") }
	if err := (runKind{}).Run(context.Background(), f.sc); err == nil || err.Error() != "exit status 1" {
		t.Errorf("err = %v", err)
	}
}

func TestRunKindIsUncached(t *testing.T) {
	if _, ok := steps.Kind(runKind{}).(steps.Uncached); !ok {
		t.Error("a run step would be cached: smoke tests and uploads must run every time")
	}
	if got := (runKind{}).Tools(&RunParams{Argv: []string{"x"}}); got != nil {
		t.Errorf("tools %v", got)
	}
}
