package engine

import (
	"slices"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// TargetBench returns what a run's bench measured for a target, published
// or not (a budget miss publishes nothing), and whether a stand-in tool
// produced the timings; nil when the target was not benched in this run.
func TargetBench(p *plan.Plan, res *RunResult, target string) (*manifest.Bench, bool) {
	if res == nil {
		return nil, false
	}
	for _, s := range p.Steps {
		if s.Kind != "bench" || !slices.Contains(s.Targets, target) {
			continue
		}
		if out := res.Outputs[s.ID]; out != nil && out.Result != nil {
			return out.Result.Bench, len(out.Result.StandIns) > 0
		}
	}
	return nil, false
}

// TargetVisionBench returns what an image classifier's bench measured for
// a target in this run, published or not (a target that failed its gate
// was measured too: the decision table shows what it would have cost),
// and whether a stand-in produced it; nil when it was not benched.
func TargetVisionBench(p *plan.Plan, res *RunResult, target string) (*manifest.VisionBench, bool) {
	if res == nil {
		return nil, false
	}
	for _, s := range p.Steps {
		if !slices.Contains(s.Targets, target) {
			continue
		}
		if out := res.Outputs[s.ID]; out != nil && out.Result != nil && out.Result.VisionBench != nil {
			return out.Result.VisionBench, len(out.Result.StandIns) > 0
		}
	}
	return nil, false
}

// TargetStandIns lists the steps of a target that ran with stand-in
// tools in this run, in plan order.
func TargetStandIns(p *plan.Plan, res *RunResult, target string) []string {
	if res == nil {
		return nil
	}
	var out []string
	for _, s := range p.Steps {
		if s.Kind == "publish" || !slices.Contains(s.Targets, target) {
			continue
		}
		if o := res.Outputs[s.ID]; o != nil && o.Result != nil && len(o.Result.StandIns) > 0 {
			out = append(out, s.ID)
		}
	}
	return out
}

// TargetGeneration returns what a target's decode check measured in this
// run, published or not (a target that failed it shows why), and whether
// a stand-in produced it; nil when no decode check ran for it.
func TargetGeneration(p *plan.Plan, res *RunResult, target string) (*manifest.Generation, bool) {
	if res == nil {
		return nil, false
	}
	for _, s := range p.Steps {
		if !slices.Contains(s.Targets, target) {
			continue
		}
		if out := res.Outputs[s.ID]; out != nil && out.Result != nil && out.Result.Generation != nil {
			return out.Result.Generation, len(out.Result.StandIns) > 0
		}
	}
	return nil, false
}
