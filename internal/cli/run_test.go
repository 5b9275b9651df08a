package cli

import (
	"errors"
	"testing"

	"github.com/edgepipe/edgepipe/pipelines"
)

// The exit code says the worst thing that happened: a failed step, then a
// failed gate, then a failed push (whose artifacts are published locally).
func TestRunErrorRanksPushFailuresLast(t *testing.T) {
	step := &pipelines.StepError{Step: "gguf-convert:f16", Err: errors.New("exit status 1")}
	gate := &pipelines.GateError{Target: "q2", Gate: &pipelines.GateResult{Target: "q2"}}
	push := &pipelines.PushError{Target: "q8", Dir: "artifacts/x/q8", Dest: "oci://localhost:5000/x:q8", Err: errors.New("connection refused")}
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
		res := &pipelines.RunResult{Failed: tc.failed}
		err := runError(res, tc.failed[0])
		if got := runExitCode(err); got != tc.want {
			t.Errorf("failures %v: exit %d, want %d", tc.failed, got, tc.want)
		}
	}
}
