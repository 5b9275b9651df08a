// Package waitpolicy measures what OpenMP's wait policy costs one tool
// command: the command timed in alternating pairs with
// OMP_WAIT_POLICY=PASSIVE (what steps.ThreadEnv gives torch's steps) and
// with the runtime's default, so that a step kind's choice of
// Resources.OwnWaitPolicy rests on a measurement anyone can repeat.
package waitpolicy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// Command returns the one command line step stepID ran among steps, with
// its thread count (-t N) set to threads: a cached step's manifest keeps
// the grant of whichever run made it.
func Command(steps []manifest.Step, stepID string, threads int) ([]string, error) {
	i := slices.IndexFunc(steps, func(s manifest.Step) bool { return s.ID == stepID })
	if i < 0 {
		return nil, fmt.Errorf("no step %s among the manifests' steps", stepID)
	}
	if len(steps[i].Argv) != 1 {
		return nil, fmt.Errorf("step %s ran %d commands; want 1", stepID, len(steps[i].Argv))
	}
	argv := slices.Clone(steps[i].Argv[0])
	t := slices.Index(argv, "-t")
	if t < 0 || t+1 >= len(argv) {
		return nil, fmt.Errorf("step %s's command has no -t N: %s", stepID, strings.Join(argv, " "))
	}
	argv[t+1] = strconv.Itoa(threads)
	return argv, nil
}

// Times are the wall times of each side, one per pair.
type Times struct{ Default, Passive []time.Duration }

// Measure runs argv pairs times under each policy. The side that goes
// first alternates, so that a machine slowing down or speeding up during
// the measurement weighs on both. The default side runs without
// OMP_WAIT_POLICY even if this process has one.
func Measure(ctx context.Context, argv []string, pairs int) (Times, error) {
	var t Times
	base := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "OMP_WAIT_POLICY=") })
	passive := append(slices.Clip(base), "OMP_WAIT_POLICY=PASSIVE")
	for pair := range pairs {
		order := []bool{true, false}
		if pair%2 == 1 {
			order = []bool{false, true}
		}
		for _, isPassive := range order {
			env := base
			if isPassive {
				env = passive
			}
			d, err := timeOnce(ctx, argv, env)
			if err != nil {
				return t, err
			}
			if isPassive {
				t.Passive = append(t.Passive, d)
			} else {
				t.Default = append(t.Default, d)
			}
		}
	}
	return t, nil
}

func timeOnce(ctx context.Context, argv, env []string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		tail := out.Bytes()[max(0, out.Len()-2000):]
		return d, fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, tail)
	}
	return d, nil
}
