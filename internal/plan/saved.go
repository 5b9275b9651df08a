package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/edgepipe/edgepipe/internal/boundedfile"

	"github.com/edgepipe/edgepipe/internal/getter"
)

// A saved plan is what `edgepipe plan --json` prints and `edgepipe step
// run` reads back: the recipe's path and every step with its parameters
// and cache status.

// Saved is a plan as JSON.
type Saved struct {
	Recipe string `json:"recipe"`
	// Targets are the --target patterns the plan was saved with: Steps
	// hold only those targets' steps.
	Targets []string    `json:"targets,omitempty"`
	Steps   []SavedStep `json:"steps"`
}

// SavedStep is one step of a saved plan.
type SavedStep struct {
	ID     string          `json:"id"`
	Kind   string          `json:"kind"`
	Needs  []string        `json:"needs"`
	Target string          `json:"target"`
	Cache  string          `json:"cache"`
	Params json.RawMessage `json:"params,omitempty"`
}

// Check refuses to run a step when the recipe changed since the plan
// was saved: the step would not be the one the plan describes.
func (pj *Saved) Check(p *Plan) error {
	if len(p.Steps) != len(pj.Steps) {
		return fmt.Errorf("the recipe %s changed since the plan was saved (%d steps now, %d then): save the plan again", pj.Recipe, len(p.Steps), len(pj.Steps))
	}
	for i, s := range p.Steps {
		then := pj.Steps[i]
		if s.ID != then.ID || s.Kind != then.Kind {
			return fmt.Errorf("the recipe %s changed since the plan was saved (step %d is %s now, %s then): save the plan again", pj.Recipe, i, s.ID, then.ID)
		}
		if !slices.Equal(s.Needs, then.Needs) {
			return fmt.Errorf("the recipe %s changed since the plan was saved (step %s needs %v now, %v then): save the plan again", pj.Recipe, s.ID, s.Needs, then.Needs)
		}
		// Canonical JSON on both sides: the saved params went through an
		// indenting encoder, and had the source's credentials removed.
		raw, _ := json.Marshal(s.Params)
		now, was := canonicalJSON(scrubParams(p, raw)), canonicalJSON(then.Params)
		if !bytes.Equal(now, was) {
			return fmt.Errorf("the recipe %s changed since the plan was saved (step %s's parameters are %s now, %s then): save the plan again", pj.Recipe, s.ID, now, was)
		}
	}
	return nil
}

// canonicalJSON re-encodes JSON with sorted keys and no spacing.
func canonicalJSON(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}

// Save turns a plan into its JSON form; status gives each step's cache
// status ("hit" or "miss").
func Save(p *Plan, recipePath string, status map[string]string) (*Saved, error) {
	sv := &Saved{Recipe: recipePath}
	for _, s := range p.Steps {
		needs := s.Needs
		if needs == nil {
			needs = []string{}
		}
		st := status[s.ID]
		if st != "hit" {
			st = "miss"
		}
		params, err := json.Marshal(s.Params)
		if err != nil {
			return nil, fmt.Errorf("step %s: %w", s.ID, err)
		}
		params = scrubParams(p, params)
		sv.Steps = append(sv.Steps, SavedStep{ID: s.ID, Kind: s.Kind, Needs: needs, Target: s.Target, Cache: st, Params: params})
	}
	return sv, nil
}

// scrubParams removes the model source's credentials from a step's
// params: a saved plan is printed and kept, and `step run` reads the
// source from the recipe, not from the plan.
func scrubParams(p *Plan, params []byte) []byte {
	if p.Recipe == nil || p.Recipe.Model.Source == "" {
		return params
	}
	return []byte(getter.Scrub(p.Recipe.Model.Source, string(params)))
}

// ReadSaved reads a plan written by `edgepipe plan --json` (or the
// plan.json of a bundle). A relative recipe path is taken relative to the
// plan's folder, so a plan and its recipe can move together.
func ReadSaved(path string) (*Saved, error) {
	b, err := boundedfile.Read(path, boundedfile.ManifestLimit)
	if err != nil {
		return nil, fmt.Errorf("read the plan: %v", err)
	}
	var pj Saved
	if err := json.Unmarshal(b, &pj); err != nil {
		return nil, fmt.Errorf("%s is not a plan written by `edgepipe plan --json` nor a bundle written by `plan --bundle`: %v", path, err)
	}
	if pj.Recipe != "" && !filepath.IsAbs(pj.Recipe) {
		pj.Recipe = filepath.Join(filepath.Dir(path), filepath.FromSlash(pj.Recipe))
	}
	return &pj, nil
}
