package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"reflect"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/suggest"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/steps"
)

// Step is one node of the expanded graph.
type Step struct {
	ID     string   `json:"id"`
	Kind   string   `json:"kind"`
	Needs  []string `json:"needs"`
	Target string   `json:"target,omitempty"` // "" for steps targets share
	// Params is a pointer to the kind's parameters struct (PublishParams
	// for a publish step), with every value written out.
	Params any `json:"params"`
	// TimeoutS bounds the step's run in seconds (0: the kind's own); how
	// long edgepipe waits does not change what is made, so it is not in
	// the cache key.
	TimeoutS float64 `json:"timeout_s,omitempty"`
	// Data maps a role ("eval", "calibration") to a data reference; the
	// executor resolves it to a file whose digest joins the cache key, so
	// where the file lives does not matter, only what it holds.
	Data map[string]string `json:"data,omitempty"`
	// Targets lists every target this step serves (shared steps serve many).
	Targets []string `json:"targets,omitempty"`
	// Pos is where the recipe asked for this step.
	Pos recipe.Pos `json:"-"`
}

// Plan is a recipe expanded into a step graph, in a deterministic order.
type Plan struct {
	Recipe *recipe.Recipe `json:"-"`
	Steps  []*Step        `json:"steps"`
	// Preflight is what the memory pre-flight found wrong with targets
	// (a model that does not fit its device, a budget over the ceiling);
	// Fits are its predictions, which the publish steps carry.
	Preflight recipe.Diagnostics `json:"-"`
	Fits      []edge.TargetFit   `json:"-"`
	// Model is what plan time knows of the recipe's model.
	Model edge.Model `json:"-"`
	byID  map[string]*Step
}

// Step returns the step with the given id.
func (p *Plan) Step(id string) (*Step, bool) {
	s, ok := p.byID[id]
	return s, ok
}

// Step ids of the shared part of every pipeline.
const (
	SourceStepID = "source"
	// HFBaselineStepID scores the unconverted checkpoint through
	// transformers; every pipeline that is not scored by llama.cpp compares
	// against it, and the GGUF pipeline checks its F16 model against it.
	HFBaselineStepID = "hf-perplexity:baseline"
)

// PublishStepID is the id of a target's final step; a user step that needs
// a target by name needs this step.
func PublishStepID(target string) string { return "publish:" + target }

// Expand turns a parsed, validated recipe into its step graph. Steps that
// targets share appear once: one download, one F16 GGUF for every GGUF type,
// one baseline perplexity.
func Expand(r *recipe.Recipe) (*Plan, error) {
	p := &Plan{Recipe: r, byID: map[string]*Step{}}
	var diags recipe.Diagnostics
	// The memory pre-flight runs once, here: its diagnostics are the
	// plan's to report, its predictions go into each publish step.
	p.Model = edge.RecipeModel(r)
	p.Preflight, p.Fits = edge.PreflightModel(r, p.Model)
	add := func(s *Step, target string) *Step {
		if old, ok := p.byID[s.ID]; ok {
			if target != "" && !contains(old.Targets, target) {
				old.Targets = append(old.Targets, target)
			}
			return old
		}
		if target != "" {
			s.Targets = []string{target}
		}
		p.byID[s.ID] = s
		p.Steps = append(p.Steps, s)
		return s
	}

	source := add(&Step{ID: SourceStepID, Kind: "fetch", Params: &shared.FetchParams{
		Source:          r.Model.Source,
		AllowPickle:     r.Model.AllowPickle,
		TrustRemoteCode: r.Model.TrustRemoteCode,
	}, Pos: r.Model.SourcePos}, "")
	if gguf, ok, err := shared.LocalGGUF(r.Model.Source, r.Dir()); err != nil {
		diags = append(diags, recipe.Diagnostic{Pos: r.Model.SourcePos, Msg: err.Error()})
	} else if ok {
		// A local GGUF is read as a data file, so its content (not its
		// path) is in the source step's key.
		source.Data = map[string]string{shared.DataGGUF: gguf}
		source.Params.(*shared.FetchParams).GGUF = !shared.IsGGUFSource(r.Model.Source)
	}

	for i := range r.Targets {
		t := &r.Targets[i]
		f, err := catalog.ParseFormat(t.Format)
		if err != nil {
			diags = append(diags, recipe.Diagnostic{Pos: t.FormatPos, Msg: err.Error()})
			continue
		}
		fam, ok := FamilyFor(r.Task, f.Name)
		if !ok || fam.Expand == nil {
			diags = append(diags, noPipeline(r, t))
			continue
		}
		if t.Options == nil && fam.Options != nil {
			// A recipe expanded without validation (tests, tools) still
			// gets typed options, and their errors.
			if d := recipe.DecodeTargetOptions(t, fam.Options(f.Name)); len(d) > 0 {
				diags = append(diags, d...)
				continue
			}
		}
		if d := refusedArchitecture(r, t, f.Name, fam, p.Model); d != nil {
			p.Preflight = append(p.Preflight, *d)
		}
		model, checks := fam.Expand(r, t, f, add)
		if fam.Task == "" {
			// Other tasks' families add their own bench; only a text
			// generator has a tokenizer, stop set and chat template to keep.
			if !fam.NoContract {
				checks = append(checks, addContract(r, t, f, model, add).ID)
			}
			if t.Bench != nil {
				checks = append(checks, addBench(t, model, add).ID)
			}
		}
		pub := &Step{ID: PublishStepID(t.Name), Kind: "publish", Target: t.Name, Pos: t.Pos,
			Needs: append([]string{model.ID}, checks...), Params: publishParams(r, t, fam, p.Fits)}
		add(pub, t.Name)
	}
	// The refusals joined the pre-flight's findings target by target.
	p.Preflight.Sort()

	// User steps: new steps, or overrides of generated ones by id.
	for _, us := range r.Steps {
		needs := make([]string, 0, len(us.Needs))
		for _, n := range us.Needs {
			if isTarget(r, n) {
				n = PublishStepID(n)
			}
			needs = append(needs, n)
		}
		if s, ok := p.byID[us.ID]; ok {
			if d := overrideParams(s, us); d != nil {
				diags = append(diags, *d)
			}
			if len(needs) > 0 {
				// A need that names nothing, or closes a cycle, is one the
				// recipe added here: the graph's errors point at it (a
				// family's steps have no place in the recipe of their own).
				s.Pos = us.Pos
			}
			s.Needs = appendUnique(s.Needs, needs...)
			if us.TimeoutS > 0 {
				s.TimeoutS = us.TimeoutS
			}
			continue
		}
		st := &Step{ID: us.ID, Kind: us.Uses, Needs: needs, Pos: us.Pos, TimeoutS: us.TimeoutS}
		if k, ok := steps.Lookup(us.Uses); ok {
			st.Params = k.NewParams()
			if d := overrideParams(st, us); d != nil {
				diags = append(diags, *d)
			}
		}
		add(st, "")
	}

	diags = append(diags, edge.CheckData(r, p.dataUse())...)
	diags = append(diags, p.checkGraph()...)
	if len(diags) > 0 {
		sort.SliceStable(diags, func(i, j int) bool { return diags[i].Pos.Line < diags[j].Pos.Line })
		return nil, diags
	}
	return p, nil
}

// dataUse says which of the recipe's data sets a step reads.
func (p *Plan) dataUse() edge.DataUse {
	var u edge.DataUse
	for _, s := range p.Steps {
		_, cal := s.Data[steps.DataCalibration]
		_, ev := s.Data[steps.DataEval]
		u.Calibration = u.Calibration || cal
		u.Eval = u.Eval || ev
	}
	return u
}

// AddFunc adds a step to the plan for a target and returns it; a step
// whose id is already planned is shared, and the existing one is returned.
type AddFunc func(s *Step, target string) *Step

// An Expander adds a target's steps through a format family's built-in
// pipeline and returns the step whose output is the model, plus the ids of
// the quality steps that gate it (their results must record "ppl" and
// "baseline_ppl" metrics, or checks that failed make the step fail).
type Expander func(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add AddFunc) (model *Step, checks []string)

func isTarget(r *recipe.Recipe, name string) bool {
	for _, t := range r.Targets {
		if t.Name == name {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func appendUnique(list []string, more ...string) []string {
	for _, m := range more {
		if !contains(list, m) {
			list = append(list, m)
		}
	}
	return list
}

// checkGraph reports needs that name no step, unknown kinds and cycles
// (with the cycle's path), before anything runs.
func (p *Plan) checkGraph() recipe.Diagnostics {
	var diags recipe.Diagnostics
	for _, s := range p.Steps {
		if _, ok := steps.Lookup(s.Kind); !ok && s.Kind != "publish" {
			diags = append(diags, recipe.Diagnostic{Pos: s.Pos, Msg: fmt.Sprintf("step %s: unknown step kind %q", s.ID, s.Kind),
				Hint: hintKind(s.Kind)})
		}
		for _, n := range s.Needs {
			if _, ok := p.byID[n]; !ok {
				diags = append(diags, recipe.Diagnostic{Pos: s.Pos, Msg: fmt.Sprintf("step %s needs %q, which is neither a target nor a step", s.ID, n),
					Hint: "needs may name a target, a step under steps:, or a generated step id shown by `edgepipe plan`"})
			}
		}
	}
	if len(diags) > 0 {
		return diags
	}
	if cyc := p.findCycle(); cyc != nil {
		s := p.byID[cyc[0]]
		diags = append(diags, recipe.Diagnostic{Pos: s.Pos, Msg: "the steps form a cycle: " + strings.Join(cyc, " -> "),
			Hint: "remove one of these needs so the graph has an order"})
	}
	return diags
}

func (p *Plan) findCycle() []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found []string
	var visit func(id string) bool
	visit = func(id string) bool {
		color[id] = grey
		stack = append(stack, id)
		for _, n := range p.byID[id].Needs {
			switch color[n] {
			case grey:
				// Cut the stack at the first occurrence of n.
				for i, e := range stack {
					if e == n {
						found = append(append([]string{}, stack[i:]...), n)
						return true
					}
				}
			case white:
				if visit(n) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
		return false
	}
	for _, s := range p.Steps {
		if color[s.ID] == white && visit(s.ID) {
			return found
		}
	}
	return nil
}

// SetSource makes the plan fetch src instead of the recipe's model.source
// (the same model pinned to a commit). Call it before NewEngine.
func (p *Plan) SetSource(src string) {
	if s, ok := p.Step(SourceStepID); ok {
		s.Params.(*shared.FetchParams).Source = src
	}
}

// Source is the source the plan fetches.
func (p *Plan) Source() string {
	if s, ok := p.Step(SourceStepID); ok {
		return s.Params.(*shared.FetchParams).Source
	}
	return ""
}

// hintKind suggests a registered step kind for a mistyped one.
func hintKind(kind string) string {
	if c := suggest.Closest(kind, steps.Names()); c != "" {
		return fmt.Sprintf("did you mean %q? step kinds: %s", c, strings.Join(steps.Names(), ", "))
	}
	return "step kinds: " + strings.Join(steps.Names(), ", ")
}

// publishParams writes out what target t's publish judges and records:
// its settings, its gates in the form its family's task gates on, and the
// plan-time pre-flight.
func publishParams(r *recipe.Recipe, t *recipe.Target, fam *Family, fits []edge.TargetFit) *publish.Params {
	pp := &publish.Params{Recipe: r.Name, Target: t.Name, Device: t.Device, Format: t.Format, Context: t.Context,
		KVDtype: t.KVDtype, WarnDelta: t.Quality.Perplexity.WarnDelta, MaxDelta: t.Quality.Perplexity.MaxDelta,
		MinTokensPerS: t.MinTokensPerS, MaxMemoryGB: t.MaxMemoryGB, MaxFirstTokenMS: t.MaxFirstTokenMS,
		DecodeCeiling: fam.Task == ""}
	if fam.NamedArtifact != nil && fam.NamedArtifact(t.Format) {
		pp.FileStem = r.Model.FileStem()
	}
	if fam.Task != "" {
		// Other tasks gate on accuracy against the reference, or on
		// agreement with it; accuracy is the default.
		if a := t.Quality.Agreement; a != nil {
			min := a.Min
			pp.MinAgreement = &min
		}
		if a := t.Quality.Accuracy; a != nil || pp.MinAgreement == nil {
			drop := recipe.DefaultMaxAccuracyDrop
			if a != nil {
				drop = a.MaxDrop
			}
			pp.MaxAccuracyDrop = &drop
		}
	}
	for _, f := range fits {
		if f.Target == t.Name {
			pp.MemoryFit = f.ManifestMemoryFit()
			pp.Budgets = f.ManifestBudgets()
		}
	}
	return pp
}

// overrideParams applies a user step's with: to a step's typed params,
// strictly: a key the kind does not take, or a value of the wrong type, is
// an error at the step, not silently ignored.
func overrideParams(s *Step, us recipe.StepSpec) *recipe.Diagnostic {
	if len(us.With) == 0 || s.Params == nil {
		return nil
	}
	if s.Kind == "publish" {
		// The gate, the manifest and the cache key all read the target:
		// one place to write it, so an override can never be shown in the
		// plan and ignored by the gate.
		pos := us.Pos
		first := true
		for k := range us.With { // the first key written
			if p, ok := us.WithPos[k]; ok && (first || p.Line < pos.Line || p.Line == pos.Line && p.Col < pos.Col) {
				pos, first = p, false
			}
		}
		return &recipe.Diagnostic{Pos: pos, Msg: fmt.Sprintf("step %s: a publish step takes no with: its settings are its target's", us.ID),
			Hint: fmt.Sprintf("set them under targets.%s (quality.perplexity.max_delta, quality.accuracy, budgets such as min_tokens_per_s, device, format, context); a publish step override may add needs or timeout_s", s.Target)}
	}
	base, err := json.Marshal(s.Params)
	if err != nil {
		return &recipe.Diagnostic{Pos: us.Pos, Msg: fmt.Sprintf("step %s: %v", us.ID, err)}
	}
	merged := map[string]any{}
	if err := json.Unmarshal(base, &merged); err != nil {
		return &recipe.Diagnostic{Pos: us.Pos, Msg: fmt.Sprintf("step %s: %v", us.ID, err)}
	}
	keys := make([]string, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	names := make([]string, 0, len(us.With))
	for k := range us.With {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		pos, ok := us.WithPos[k]
		if !ok {
			pos = us.Pos
		}
		if _, known := merged[k]; !known {
			hint := fmt.Sprintf("a %s step takes: %s", s.Kind, strings.Join(keys, ", "))
			if c := suggest.Closest(k, keys); c != "" {
				hint = fmt.Sprintf("did you mean %q? %s", c, hint)
			}
			return &recipe.Diagnostic{Pos: pos, Msg: fmt.Sprintf("step %s: with: %q is not a parameter of a %s step", us.ID, k, s.Kind), Hint: hint}
		}
		merged[k] = us.With[k]
	}
	b, err := json.Marshal(merged)
	if err != nil {
		return &recipe.Diagnostic{Pos: us.Pos, Msg: fmt.Sprintf("step %s: %v", us.ID, err)}
	}
	typed := reflect.New(reflect.TypeOf(s.Params).Elem()).Interface()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(typed); err != nil {
		return &recipe.Diagnostic{Pos: us.Pos, Msg: fmt.Sprintf("step %s: with: a value has the wrong type for a %s step: %v", us.ID, s.Kind, err),
			Hint: "`edgepipe plan --json` shows each step's parameters and their values"}
	}
	s.Params = typed
	return nil
}
