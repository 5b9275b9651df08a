package pipelines

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/event"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/getter"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/steps"
)

// GateResult is a target's quality gate: perplexity of the converted model
// against the unconverted baseline, on the same tokens.
type GateResult struct {
	Target    string  `json:"target"`
	Baseline  float64 `json:"baseline"`
	Converted float64 `json:"converted"`
	Delta     float64 `json:"delta"`
	Ratio     float64 `json:"ratio"`
	WarnDelta float64 `json:"warn_delta"`
	MaxDelta  float64 `json:"max_delta"`
	Verdict   string  `json:"verdict"`
	Step      string  `json:"step"`
}

// GateError is a target whose quality gate failed: nothing was published.
// Gate is set for a perplexity gate; Check for any other validation.
type GateError struct {
	Target string
	Gate   *GateResult
	Check  *steps.Check
	Step   string
	// Earlier is the target's folder when an earlier run published there:
	// it is left as it was (nothing already done is destroyed), but it is
	// not this recipe's result, and the message says so.
	Earlier string
}

func (e *GateError) Error() string {
	var msg string
	if e.Check != nil {
		msg = fmt.Sprintf("target %s failed its quality gate: check %q of step %s failed: %s; nothing was published",
			e.Target, e.Check.Name, e.Step, e.Check.Detail)
	} else {
		g := e.Gate
		msg = fmt.Sprintf("target %s failed its quality gate: perplexity %.4f against baseline %.4f is a delta of %+.4f, over max_delta %.2f; nothing was published. Investigate the conversion (a delta over 2.0 usually means it is broken), use more bits, or raise quality.perplexity.max_delta for this target if the loss is acceptable",
			g.Target, g.Converted, g.Baseline, g.Delta, g.MaxDelta)
	}
	if e.Earlier != "" {
		msg += fmt.Sprintf(". %s still holds an earlier run's artifacts, which this run did not replace: they are not this recipe's result (delete the folder if nothing may pick them up)", e.Earlier)
	}
	return msg
}

// Contained marks a gate failure as a verdict on its own target: under
// fail-fast, other targets still convert and publish (the run exits 3).
func (e *GateError) Contained() bool { return true }

// Judge applies the domain brief's thresholds: under warn_delta is
// excellent, over max_delta is a failure.
func Judge(baseline, converted, warnDelta, maxDelta float64) (delta, ratio float64, verdict string) {
	delta = converted - baseline
	ratio = converted / baseline
	switch {
	case math.IsNaN(converted) || delta > maxDelta:
		verdict = manifest.VerdictFail
	case delta < warnDelta:
		verdict = manifest.VerdictExcellent
	default:
		verdict = manifest.VerdictOK
	}
	return delta, ratio, verdict
}

// publish gates a target on its checks and, when they pass, publishes its
// folder atomically. A target whose folder already holds exactly this
// build (same publish key, files present) is left alone, so a no-op rerun
// reads no model bytes.
func (e *Engine) publish(ctx context.Context, s *Step) (string, *GateResult, error) {
	started := time.Now()
	ins, err := e.inputsOf(ctx, s)
	if err != nil {
		return "", nil, err
	}
	model := ins[0]
	final := filepath.Join(e.opt.OutDir, s.Target)
	failed := func(ge *GateError) error {
		if _, err := os.Stat(filepath.Join(final, manifest.FileName)); err == nil {
			ge.Earlier = final
		}
		return ge
	}
	var gate *GateResult
	for _, in := range ins[1:] {
		// Any validation a check step records as failed fails the target
		// (a logits mismatch, a structural check), not only perplexity.
		for _, c := range in.Result.Checks {
			if !c.Passed {
				c := c
				e.emit(event.Event{Type: event.Gate, Step: s.ID, Target: s.Target, Message: fmt.Sprintf("check %s failed: %s", c.Name, c.Detail)})
				return "", gate, failed(&GateError{Target: s.Target, Check: &c, Step: in.StepID})
			}
		}
		m := in.Result.Metrics
		conv, okc := m["ppl"]
		base, okb := m["baseline_ppl"]
		if !okc || !okb {
			continue
		}
		warn, max := s.Params.Float("warn_delta", recipe.DefaultWarnDelta), s.Params.Float("max_delta", recipe.DefaultMaxDelta)
		d, r, v := Judge(base, conv, warn, max)
		gate = &GateResult{Target: s.Target, Baseline: base, Converted: conv, Delta: d, Ratio: r,
			WarnDelta: warn, MaxDelta: max, Verdict: v, Step: in.StepID}
		e.emit(event.Event{Type: event.Gate, Step: s.ID, Target: s.Target,
			Message: fmt.Sprintf("perplexity %.4f vs baseline %.4f: delta %+.4f -> %s", conv, base, d, v)})
		if v == manifest.VerdictFail {
			return "", gate, failed(&GateError{Target: s.Target, Gate: gate})
		}
	}
	bench := benchOutput(ins[1:])
	budgets := budgetChecks(e.plan.Recipe.TargetNamed(s.Target), bench)
	for _, c := range budgets {
		if !c.Passed {
			e.emit(event.Event{Type: event.Gate, Step: s.ID, Target: s.Target, Message: fmt.Sprintf("check %s failed: %s", c.Name, c.Detail)})
			return "", gate, failed(&GateError{Target: s.Target, Check: &c, Step: bench.StepID})
		}
	}

	pubKey, err := e.publishKey(s, ins)
	if err != nil {
		return "", gate, err
	}
	if !e.opt.Force && alreadyPublished(final, s.ID, pubKey) && e.provenanceCurrent(final) {
		e.record(&Output{StepID: s.ID, Kind: "publish", Dir: final, Result: publishedResult(model), CacheHit: true})
		e.emit(event.Event{Type: event.Cached, Step: s.ID, Target: s.Target, Path: final, Message: "already published"})
		return final, gate, e.pushRemotes(ctx, s, final)
	}

	e.emit(event.Event{Type: event.Started, Step: s.ID, Kind: "publish", Target: s.Target})
	if err := manifest.CleanStale(filepath.Dir(final)); err != nil {
		return "", gate, err
	}
	staging, err := manifest.Stage(final)
	if err != nil {
		return "", gate, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(staging)
		}
	}()
	var size int64
	for _, f := range model.Files {
		if f.Path == steps.ResultFile || f.Path == stepLogName {
			continue
		}
		if err := copyInto(filepath.Join(model.Dir, f.Path), filepath.Join(staging, f.Path)); err != nil {
			return "", gate, fmt.Errorf("publish %s: %w", s.Target, err)
		}
		size += f.Size
	}
	m := e.manifestFor(s, model, ins[1:], gate, size)
	if bench != nil {
		m.Metrics.Bench = manifestBench(bench)
		fillBudgetActuals(m.Budgets, m.Metrics.Bench)
		for _, c := range budgets {
			m.Metrics.Checks = append(m.Metrics.Checks, manifest.Check{Name: c.Name, Passed: c.Passed, Detail: c.Detail})
		}
		sort.SliceStable(m.Metrics.Checks, func(i, j int) bool { return m.Metrics.Checks[i].Name < m.Metrics.Checks[j].Name })
	}
	for _, st := range e.upstream(s) {
		out := e.output(st.ID)
		if out == nil || out.LogPath == "" {
			continue
		}
		if _, err := os.Stat(out.LogPath); err != nil {
			continue
		}
		if err := copyInto(out.LogPath, filepath.Join(staging, "logs", safeName(st.ID)+".log")); err != nil {
			return "", gate, fmt.Errorf("publish %s: %w", s.Target, err)
		}
	}
	m.Steps = append(m.Steps, manifest.Step{ID: s.ID, Kind: "publish", KindVersion: 1, CacheKey: pubKey,
		Started: started, Finished: time.Now(), DurationS: time.Since(started).Seconds()})
	if err := manifest.WriteContext(ctx, staging, m); err != nil {
		return "", gate, fmt.Errorf("publish %s: %w", s.Target, err)
	}
	if err := e.writeProvenance(s, staging, m); err != nil {
		return "", gate, fmt.Errorf("publish %s: %w", s.Target, err)
	}
	if err := manifest.PublishContext(ctx, staging, final); err != nil {
		return "", gate, fmt.Errorf("publish %s: %w", s.Target, err)
	}
	ok = true
	e.record(&Output{StepID: s.ID, Kind: "publish", Dir: final, Result: publishedResult(model)})
	e.emit(event.Event{Type: event.Published, Step: s.ID, Target: s.Target, Path: final, Seconds: time.Since(started).Seconds()})
	return final, gate, e.pushRemotes(ctx, s, final)
}

// publishedResult names the published model file so user steps can refer
// to ${target.outputs.model}.
func publishedResult(model *Output) *steps.Result {
	r := &steps.Result{}
	if model.Result != nil {
		for role, rel := range model.Result.Files {
			r.SetFile(role, rel)
		}
	}
	return r
}

// alreadyPublished reports whether final holds the build with this publish
// key, with every file present at its recorded size.
func alreadyPublished(final, stepID, key string) bool {
	m, err := manifest.Read(final)
	if err != nil {
		return false
	}
	found := false
	for _, st := range m.Steps {
		if st.ID == stepID && st.CacheKey == key {
			found = true
		}
	}
	if !found {
		return false
	}
	for _, f := range m.Files {
		st, err := os.Stat(filepath.Join(final, filepath.FromSlash(f.Path)))
		if err != nil || st.Size() != f.Size {
			return false
		}
	}
	return true
}

// publishKey identifies what a publish would write: its params, its
// inputs' content and the edgepipe version that writes the manifest.
func (e *Engine) publishKey(s *Step, ins []*Output) (string, error) {
	var inDigests []string
	for _, in := range ins {
		inDigests = append(inDigests, in.StepID+"="+in.Digest)
	}
	return digest.Key(map[string]any{"params": s.Params, "inputs": inDigests, "version": e.opt.Version})
}

// publishStatus is "hit" when the target's folder already holds exactly
// what a run would publish.
func (e *Engine) publishStatus(ctx context.Context, s *Step) string {
	ins, err := e.inputsOf(ctx, s)
	if err != nil {
		return "miss"
	}
	key, err := e.publishKey(s, ins)
	final := filepath.Join(e.opt.OutDir, s.Target)
	if err != nil || !alreadyPublished(final, s.ID, key) || !e.provenanceCurrent(final) {
		return "miss"
	}
	return "hit"
}

func (e *Engine) output(id string) *Output {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.outputs[id]
}

// upstream lists every step s depends on, in plan order.
func (e *Engine) upstream(s *Step) []*Step {
	seen := map[string]bool{}
	var walk func(id string)
	walk = func(id string) {
		st, _ := e.plan.Step(id)
		for _, n := range st.Needs {
			if !seen[n] {
				seen[n] = true
				walk(n)
			}
		}
	}
	walk(s.ID)
	var out []*Step
	for _, st := range e.plan.Steps {
		if seen[st.ID] && st.Kind != "publish" {
			out = append(out, st)
		}
	}
	return out
}

func (e *Engine) manifestFor(s *Step, model *Output, checks []*Output, gate *GateResult, size int64) *manifest.Manifest {
	r := e.plan.Recipe
	m := &manifest.Manifest{
		ManifestVersion: manifest.Version,
		EdgepipeVersion: e.opt.Version,
		Recipe:          manifest.Recipe{Name: r.Name, Path: r.Path},
		Target: manifest.Target{Name: s.Target, Device: s.Params.String("device", ""), Format: s.Params.String("format", ""),
			Context: s.Params.Int("context", 0), KVDtype: s.Params.String("kv_dtype", "")},
		Source:     manifest.Source{URI: getter.Redact(r.Model.Source)}, // manifests are published: no credentials
		Toolchains: map[string]manifest.Toolchain{},
	}
	if fd, err := e.opt.Cache.Memo().File(r.Path); err == nil {
		m.Recipe.SHA256 = fd.SHA256
	}
	if src := e.output(SourceStepID); src != nil {
		for _, f := range src.Files {
			if f.Path == steps.ResultFile || f.Path == stepLogName {
				continue
			}
			m.Source.Files = append(m.Source.Files, manifest.File{Path: f.Path, SHA256: f.SHA256, Size: f.Size})
		}
		if src.Result != nil {
			m.Source.ResolvedRevision = src.Result.Facts["resolved_revision"]
		}
	}
	for _, st := range e.upstream(s) {
		out := e.output(st.ID)
		if out == nil {
			continue
		}
		ms := manifest.Step{ID: st.ID, Kind: st.Kind, CacheKey: out.Key, CacheHit: out.CacheHit}
		if k, ok := steps.Lookup(st.Kind); ok {
			ms.KindVersion = k.Version()
		}
		if out.Result != nil {
			ms.Argv = out.Result.Argv
			for fact, v := range out.Result.Facts {
				if tool, ok := strings.CutPrefix(fact, "version:"); ok {
					if ms.ToolVersions == nil {
						ms.ToolVersions = map[string]string{}
					}
					ms.ToolVersions[tool] = v
				}
				if strings.HasPrefix(fact, "stand_in:") {
					ms.StandIn = true
				}
			}
			ms.Note = stepNote(out.Result.Facts, ms.StandIn)
			for _, c := range out.Result.Checks {
				m.Metrics.Checks = append(m.Metrics.Checks, manifest.Check{Name: st.ID + ": " + c.Name, Passed: c.Passed, Detail: c.Detail})
			}
		}
		if !out.Started.IsZero() {
			ms.Started, ms.Finished = out.Started, out.Finished
			ms.DurationS = out.Finished.Sub(out.Started).Seconds()
		}
		for _, t := range e.toolsOf(st) {
			if name, ok := strings.CutPrefix(t.Origin, "toolchain "); ok {
				ms.Toolchain = name
				tc := m.Toolchains[name]
				tc.LockDigest = t.Identity
				if tc.Versions == nil {
					tc.Versions = map[string]string{}
				}
				tc.Versions[t.Name] = t.Version
				m.Toolchains[name] = tc
			}
		}
		m.Steps = append(m.Steps, ms)
	}
	if len(m.Toolchains) == 0 {
		m.Toolchains = nil
	}
	sz := size
	m.Metrics.SizeBytes = &sz
	if dev, ok := catalog.Lookup(m.Target.Device); ok && size > 0 && dev.MemoryBandwidthGBs > 0 {
		c := catalog.DecodeCeiling(dev.MemoryBandwidthGBs, float64(size)/1e9)
		m.Metrics.DecodeCeilingTokS = &c
	}
	if fit := e.fitFor(s.Target); fit != nil {
		m.Metrics.MemoryFit = fit.ManifestMemoryFit()
		m.Budgets = fit.ManifestBudgets()
	}
	if gate != nil {
		var chk *Output
		for _, c := range checks {
			if c.StepID == gate.Step {
				chk = c
			}
		}
		p := &manifest.Perplexity{Baseline: gate.Baseline, Converted: gate.Converted, Delta: gate.Delta, Ratio: gate.Ratio,
			Verdict: gate.Verdict, WarnDelta: gate.WarnDelta, MaxDelta: gate.MaxDelta}
		if chk != nil {
			mt := chk.Result.Metrics
			p.EvalTokens, p.Context, p.Chunks = int(mt["eval_tokens"]), int(mt["context"]), int(mt["chunks"])
			p.Backend = chk.Result.Facts["backend"]
			if v, ok := mt["kl_divergence"]; ok {
				m.Metrics.KLDivergence = &v
			}
			if v, ok := mt["top1_agreement"]; ok {
				m.Metrics.Top1Agreement = &v
			}
		}
		m.Metrics.Perplexity = p
		m.Metrics.Checks = append(m.Metrics.Checks, manifest.Check{Name: "perplexity gate", Passed: gate.Verdict != manifest.VerdictFail,
			Detail: fmt.Sprintf("delta %+.4f (warn %.2f, max %.2f): %s", gate.Delta, gate.WarnDelta, gate.MaxDelta, gate.Verdict)})
	}
	sort.SliceStable(m.Metrics.Checks, func(i, j int) bool { return m.Metrics.Checks[i].Name < m.Metrics.Checks[j].Name })
	return m
}

// fitFor returns the plan-time memory pre-flight and budget predictions of
// a target, computed once per run.
func (e *Engine) fitFor(target string) *TargetFit {
	e.fitsOnce.Do(func() { _, e.fits = Preflight(e.plan) })
	for i := range e.fits {
		if e.fits[i].Target == target {
			return &e.fits[i]
		}
	}
	return nil
}

// stepNote keeps what a step observed (the fallbacks llama-quantize really
// used, the backend) in the manifest, in a stable order.
func stepNote(facts map[string]string, standIn bool) string {
	var parts []string
	if standIn {
		parts = append(parts, "ran with a stand-in tool, not the real one")
	}
	var keys []string
	for k := range facts {
		if !strings.HasPrefix(k, "version:") && !strings.HasPrefix(k, "stand_in:") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+": "+facts[k])
	}
	return strings.Join(parts, "; ")
}

// copyInto copies src to dst, creating dst's folder. Copies, not hard
// links: a user editing a published file must never change the cache.
func copyInto(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// IsGateFailure reports whether err is (or wraps) a failed quality gate.
func IsGateFailure(err error) bool {
	var ge *GateError
	return errors.As(err, &ge)
}
