package argo

import (
	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/steps"
)

// StepsFrom is the plan's steps with their predicted weights (engine's
// Predict) and host needs.
func StepsFrom(pl *plan.Plan, pred map[string]engine.Prediction) []Step {
	var out []Step
	for _, s := range pl.Steps {
		st := Step{ID: s.ID, Kind: s.Kind, Target: s.Target, Needs: s.Needs}
		if k, ok := steps.Lookup(s.Kind); ok {
			r := k.Resources(s.Params)
			p := pred[s.ID]
			st.MemoryMB, st.Cores = p.MemoryMB, p.MaxCores
			st.Host, st.Network = r.Host, r.Network
		} else {
			st.Publish = s.Kind == "publish"
		}
		out = append(out, st)
	}
	return out
}
