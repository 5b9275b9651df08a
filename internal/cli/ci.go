package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/runreport"

	"github.com/edgepipe/edgepipe/internal/engine"

	"github.com/edgepipe/edgepipe/internal/report"
)

// finish writes the reports a run was asked for and returns err, the
// run's own error. A report that cannot be written fails a run that
// otherwise succeeded: CI would lose its record of it.
// finish writes the reports a run was asked for and returns err, the
// run's own error. A report that cannot be written fails a run that
// otherwise succeeded: CI would lose its record of it.
func finish(c *runreport.Recorder, env *Env, junitPath string, asJSON bool, res *engine.RunResult, err error) error {
	outcomes := c.Outcomes(res)
	code := runExitCode(err)
	var problems []error
	rep := c.Report(outcomes, res, code, exitMeaning[code])
	if c.OutDir != "" {
		var foreign *runreport.ForeignReportError
		if werr := runreport.WriteReports(c.OutDir, rep); errors.As(werr, &foreign) {
			fmt.Fprintf(env.Stderr, "edgepipe: warning: %v\n", werr)
		} else if werr != nil {
			problems = append(problems, fmt.Errorf("write the run's report in %s: %w", c.OutDir, werr))
		}
	}
	if path := env.Getenv("GITHUB_STEP_SUMMARY"); path != "" {
		if werr := runreport.AppendFile(path, report.Markdown(rep)); werr != nil {
			problems = append(problems, fmt.Errorf("append the job summary to $GITHUB_STEP_SUMMARY (%s): %w", path, werr))
		}
	}
	if junitPath != "" {
		if werr := atomicfile.WriteMkdir(junitPath, c.JUnit(outcomes, Version), 0o644); werr != nil {
			problems = append(problems, fmt.Errorf("write the JUnit report %s: %w", junitPath, werr))
		}
	}
	if asJSON {
		b, _ := json.Marshal(c.Finished(code, outcomes))
		fmt.Fprintln(env.Stdout, string(b))
	}
	if len(problems) == 0 {
		return err
	}
	if err == nil {
		return &ExitError{Code: ExitStepFailed, Err: errors.Join(problems...)}
	}
	for _, p := range problems {
		fmt.Fprintf(env.Stderr, "edgepipe: %v\n", p)
	}
	return err
}

// runExitCode is the exit code Main will give a run's error (runError's
// result): the table in docs/cli.md.
func runExitCode(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case engine.IsInterrupted(err):
		return ExitInterrupted
	case publish.IsGateFailure(err):
		return ExitGateFailed
	case publish.IsPushFailure(err):
		return ExitPushFailed
	}
	return ExitStepFailed
}

var exitMeaning = map[int]string{
	ExitOK:            "ok",
	ExitStepFailed:    "a step failed",
	ExitUsage:         "invalid recipe or usage",
	ExitGateFailed:    "a quality gate failed",
	ExitLockMismatch:  "the lock is out of date",
	ExitNotReproduced: "not bit-identical",
	ExitPushFailed:    "a push to a remote failed",
	ExitNeedMissing:   "a step it needs is in no cache",
	ExitInterrupted:   "interrupted",
}
