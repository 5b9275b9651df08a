package cli

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/engine"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/report"
)

// printBenches adds each benched target's measurement to the run summary:
// decode speed and its latency percentiles, time to first token, and the
// decode speed against this host's bandwidth ceiling.
func printBenches(env *Env, pl *plan.Plan, res *engine.RunResult) {
	for _, t := range pl.Recipe.Targets {
		b, standIn := engine.TargetBench(pl, res, t.Name)
		if b == nil {
			continue
		}
		note := ""
		if standIn {
			note = " [stand-in: not a measurement]"
		}
		fmt.Fprintf(env.Stdout, "bench %s (%s, %d threads, %s): decode %.4g tok/s (token p50 %.2f ms, p95 %.2f, p99 %.2f); first token %.1f ms for %d tokens (prompt %.4g tok/s)%s\n",
			t.Name, b.Backend, b.Threads, b.Host, b.DecodeTokS, b.TokenP50MS, b.TokenP95MS, b.TokenP99MS,
			b.FirstTokenMS, b.PromptTokens, b.PromptTokS, note)
		if b.HostBandwidthGBs != nil && b.HostCeilingTokS != nil && b.Efficiency != nil {
			fmt.Fprintf(env.Stdout, "  host memory bandwidth %.2f GB/s -> ceiling %.4g tok/s for %s; measured decode is %.0f%% of it\n",
				*b.HostBandwidthGBs, *b.HostCeilingTokS, report.HumanBytes(b.ModelBytes), 100**b.Efficiency)
		}
	}
}
