package plan

import (
	"fmt"
	"path"
	"strings"

	"github.com/edgepipe/edgepipe/internal/suggest"
	"github.com/edgepipe/edgepipe/steps"
)

// SelectError is a --target pattern that names no target of the recipe.
type SelectError struct {
	Pattern string
	// Closest is the nearest target name ("" when none is close).
	Closest string
	Targets []string
}

func (e *SelectError) Error() string {
	msg := fmt.Sprintf("--target %s matches no target of the recipe", e.Pattern)
	if e.Closest != "" {
		msg += fmt.Sprintf("; did you mean %s?", e.Closest)
	}
	return msg + " (its targets: " + strings.Join(e.Targets, ", ") + ")"
}

// Select narrows a plan to the targets whose names match one of patterns
// (path.Match globs: laptop-*, *-q8) and the steps they need. User steps
// that run after a selected target (a smoke test needing it) stay when all
// their needs are selected. Cache keys do not depend on which targets a
// run selects, so a narrowed run shares every cached step with a full one.
// The recipe is shallow-copied with its targets filtered, so summaries
// and reports list only what was selected.
func Select(p *Plan, patterns []string) (*Plan, error) {
	if len(patterns) == 0 {
		return p, nil
	}
	names := make([]string, len(p.Recipe.Targets))
	for i, t := range p.Recipe.Targets {
		names[i] = t.Name
	}
	chosen := map[string]bool{}
	for _, pat := range patterns {
		if _, err := path.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("--target %s is not a valid pattern: %w", pat, err)
		}
		matched := false
		for _, n := range names {
			if ok, _ := path.Match(pat, n); ok {
				chosen[n], matched = true, true
			}
		}
		if !matched {
			return nil, &SelectError{Pattern: pat, Closest: suggest.Closest(pat, names), Targets: names}
		}
	}
	keep := map[string]bool{}
	var need func(id string)
	need = func(id string) {
		if keep[id] {
			return
		}
		keep[id] = true
		if s, ok := p.byID[id]; ok {
			for _, n := range s.Needs {
				need(n)
			}
		}
	}
	for n := range chosen {
		need(PublishStepID(n))
	}
	// User steps after a selected target, to a fixed point: a step of the
	// recipe's own (no target generated it) whose needs are all kept.
	for grew := true; grew; {
		grew = false
		for _, s := range p.Steps {
			if keep[s.ID] || len(s.Targets) > 0 || len(s.Needs) == 0 {
				continue
			}
			all := true
			for _, n := range s.Needs {
				all = all && keep[n]
			}
			if all {
				keep[s.ID], grew = true, true
			}
		}
	}
	r := *p.Recipe
	r.Targets = nil
	for _, t := range p.Recipe.Targets {
		if chosen[t.Name] {
			r.Targets = append(r.Targets, t)
		}
	}
	np := &Plan{Recipe: &r, byID: map[string]*Step{}}
	for _, s := range p.Steps {
		if keep[s.ID] {
			np.Steps = append(np.Steps, s)
			np.byID[s.ID] = s
		}
	}
	return np, nil
}

// TargetNames are the plan's targets, in recipe order.
func (p *Plan) TargetNames() []string {
	out := make([]string, len(p.Recipe.Targets))
	for i, t := range p.Recipe.Targets {
		out[i] = t.Name
	}
	return out
}

// Tools lists the tools the plan's steps run, each once, in plan order.
// Steps this host refuses (NVIDIA kinds without a GPU), and the steps
// after them, run none here.
func (p *Plan) Tools() []string {
	seen := map[string]bool{}
	var out []string
	refused := p.Refused()
	for _, s := range p.Steps {
		k, ok := steps.Lookup(s.Kind)
		if !ok || refused[s.ID] {
			continue
		}
		for _, t := range k.Tools(s.Params) {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// Refused are the steps this host cannot run: those whose kind refuses
// it (an NVIDIA kind without a GPU) and every step that needs one of them,
// directly or not (a check of a model that cannot be made here).
func (p *Plan) Refused() map[string]bool {
	refused := map[string]bool{}
	var visit func(s *Step) bool
	done := map[string]bool{}
	visit = func(s *Step) bool {
		if done[s.ID] {
			return refused[s.ID]
		}
		done[s.ID] = true
		if k, ok := steps.Lookup(s.Kind); ok {
			if hr, ok := k.(steps.HostRequirer); ok && hr.RequireHost(s.Params) != nil {
				refused[s.ID] = true
			}
		}
		for _, n := range s.Needs {
			if ns, ok := p.Step(n); ok && visit(ns) {
				refused[s.ID] = true
			}
		}
		return refused[s.ID]
	}
	for _, s := range p.Steps {
		visit(s)
	}
	return refused
}

// Upstream is a shallow copy of the plan holding only step id and the
// steps it needs, directly or not: what one step job must be able to key
// (every one of their tools' identities) and run.
func (p *Plan) Upstream(id string) *Plan {
	keep := map[string]bool{}
	var need func(id string)
	need = func(id string) {
		if keep[id] {
			return
		}
		keep[id] = true
		if s, ok := p.Step(id); ok {
			for _, n := range s.Needs {
				need(n)
			}
		}
	}
	need(id)
	sub := *p
	sub.Steps = nil
	for _, s := range p.Steps {
		if keep[s.ID] {
			sub.Steps = append(sub.Steps, s)
		}
	}
	return &sub
}
