package cli

import (
	"errors"
	"runtime"
	"testing"

	"github.com/edgepipe/edgepipe/internal/host"
	"github.com/edgepipe/edgepipe/internal/publish"

	"github.com/edgepipe/edgepipe/internal/engine"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/recipe"
)

// The exit code says the worst thing that happened: a failed step, then a
// failed gate, then a failed push (whose artifacts are published locally).
func TestRunErrorRanksPushFailuresLast(t *testing.T) {
	step := &engine.StepError{Step: "gguf-convert:f16", Err: errors.New("exit status 1")}
	gate := &publish.GateError{Target: "q2", Gate: &publish.GateResult{Target: "q2"}}
	push := &publish.PushError{Target: "q8", Dir: "artifacts/x/q8", Dest: "oci://localhost:5000/x:q8", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		failed []error
		want   int
	}{
		{[]error{push}, ExitPushFailed},
		{[]error{push, gate}, ExitGateFailed},
		{[]error{gate, push}, ExitGateFailed},
		{[]error{push, gate, step}, ExitStepFailed},
		{[]error{errors.Join(push, push)}, ExitPushFailed},
	} {
		res := &engine.RunResult{Failed: tc.failed}
		err := runError(res, tc.failed[0])
		if got := runExitCode(err); got != tc.want {
			t.Errorf("failures %v: exit %d, want %d", tc.failed, got, tc.want)
		}
	}
}

// An explicit -j wins over the recipe's resources.jobs even when it equals
// the core count; the recipe wins over the default; --max-memory-gb over
// the recipe's max_memory_gb.
func TestBudgets(t *testing.T) {
	withRecipe := &plan.Plan{Recipe: &recipe.Recipe{Resources: recipe.Resources{Jobs: 3, MaxMemoryGB: 6}}}
	bare := &plan.Plan{Recipe: &recipe.Recipe{}}
	for _, tc := range []struct {
		name     string
		c        common
		plan     *plan.Plan
		wantJobs int
		wantMiB  int64
	}{
		// GB are 1e9 bytes: 6 GB is 5,722 MiB.
		{"recipe", common{}, withRecipe, 3, 5722},
		{"flag equal to the cores", common{jobs: runtime.NumCPU(), maxMemGB: 2}, withRecipe, runtime.NumCPU(), 1907},
		{"flag", common{jobs: 1}, withRecipe, 1, 5722},
		{"machine", common{}, bare, runtime.NumCPU(), int64(host.MemoryGB() * 1024)},
	} {
		jobs, mem := tc.c.budgets(tc.plan)
		if jobs != tc.wantJobs || mem != tc.wantMiB {
			t.Errorf("%s: budgets = %d jobs, %d MiB; want %d, %d", tc.name, jobs, mem, tc.wantJobs, tc.wantMiB)
		}
	}
}
