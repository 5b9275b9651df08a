// Package publish is the last stage of a run: it judges a target's quality
// gate on its check steps' results, and only when every check passed writes
// the target's folder (model files, manifest, logs, provenance) by atomic
// rename, then pushes it to the target's remotes. It works on typed records
// of finished steps; the executor decides when it runs.
package publish

import (
	"context"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/getter"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/provenance"
	"github.com/edgepipe/edgepipe/steps"
)

// Publisher publishes targets into OutDir/<target>.
type Publisher struct {
	OutDir  string
	Version string
	// Force publishes again even when the folder already holds this build.
	Force bool
	// NoPush skips the targets' remotes.
	NoPush bool
	// Signer signs each target's provenance; nil leaves it unsigned.
	Signer *provenance.Signer
	// Run identifies the invocation in provenance.
	Run  provenance.Run
	Emit func(event.Event)
}

// Request is one target's publish: every record it judges and writes.
type Request struct {
	// StepID is the publish step's id.
	StepID string
	// Params are the target's settings and gates, as the plan wrote them.
	Params *Params
	// RecipePath, RecipeSHA256 and SourceURI identify the recipe and the
	// model source for the manifest (the source without credentials).
	RecipePath   string
	RecipeSHA256 string
	SourceURI    string
	// Remotes are where the target is pushed once published.
	Remotes []Remote
	// Model is the step whose output is the artifact.
	Model *steps.Output
	// Checks are the steps that gate it (quality checks, the bench).
	Checks []*steps.Output
	// Upstream is every step the target depends on, in plan order, each
	// with the tools it ran.
	Upstream []*steps.Output
	// Source is the source step's output, when this run has it.
	Source *steps.Output
	// Deps are what the steps read that the manifest does not record.
	Deps []provenance.ResourceDescriptor
	// Key identifies what this publish writes (its inputs' content, the
	// target's settings, the edgepipe version).
	Key string
}

// Result is what a publish did.
type Result struct {
	// Dir is the published folder ("" when nothing was published).
	Dir  string
	Gate *GateResult
	// Accuracy is an image classifier's gate.
	Accuracy *AccuracyResult
	// Agreement is an image classifier's agreement gate.
	Agreement *AgreementResult
	// Cached is true when the folder already held this build.
	Cached bool
}

func (p *Publisher) emit(ev event.Event) {
	if p.Emit != nil {
		p.Emit(ev)
	}
}

// Dir is where a target is published.
func (p *Publisher) Dir(target string) string { return filepath.Join(p.OutDir, target) }

// Current reports whether the target's folder already holds exactly what
// this request would publish: same key, every file present at its size, and
// provenance this publisher would write.
func (p *Publisher) Current(req *Request) bool {
	final := p.Dir(req.Params.Target)
	return alreadyPublished(final, req.Params.Recipe, req.Params.Target, req.StepID, req.Key) && p.provenanceCurrent(final)
}

// Publish gates a target on its checks and, when they pass, publishes its
// folder atomically. A target whose folder already holds exactly this
// build (same publish key, files present) is left alone, so a no-op rerun
// reads no model bytes.
func (p *Publisher) Publish(ctx context.Context, req *Request) (*Result, error) {
	started := time.Now()
	t := req.Params
	res := &Result{}
	final := p.Dir(t.Target)
	failed := func(ge *GateError) error {
		if _, err := os.Stat(filepath.Join(final, manifest.FileName)); err == nil {
			ge.Earlier = final
		}
		return ge
	}
	gate, acc, agr, gerr := p.judge(req)
	res.Gate, res.Accuracy, res.Agreement = gate, acc, agr
	if gerr != nil {
		return res, failed(gerr)
	}
	bench, measured := benchOutput(req.Checks)
	budgets := budgetChecks(t, measured)
	for _, c := range budgets {
		if !c.Passed {
			p.emit(event.Event{Type: event.Gate, Step: req.StepID, Target: t.Target, Message: fmt.Sprintf("check %s failed: %s", c.Name, c.Detail)})
			return res, failed(&GateError{Target: t.Target, Check: &c, Step: bench.StepID})
		}
	}

	if !p.Force && p.Current(req) {
		p.emit(event.Event{Type: event.Cached, Step: req.StepID, Target: t.Target, Path: final, Message: "already published"})
		res.Dir, res.Cached = final, true
		return res, p.pushRemotes(ctx, req, final)
	}

	p.emit(event.Event{Type: event.Started, Step: req.StepID, Kind: "publish", Target: t.Target})
	if err := manifest.CleanStale(filepath.Dir(final)); err != nil {
		return res, err
	}
	if err := manifest.CheckReplaceable(final, t.Recipe, t.Target); err != nil {
		return res, err
	}
	staging, err := manifest.Stage(final)
	if err != nil {
		return res, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(staging)
		}
	}()
	// The bytes published are hashed while they are copied and must be
	// the ones the model's step wrote (its cache record): the manifest and
	// provenance certify only what was checked.
	var size int64
	published := publishedPath(req)
	for _, f := range req.Model.ContentFiles() {
		sum, n, err := atomicfile.Copy(filepath.Join(staging, filepath.FromSlash(published(f.Path))), filepath.Join(req.Model.Dir, f.Path), 0o644)
		if err != nil {
			return res, fmt.Errorf("publish %s: %w", t.Target, err)
		}
		if sum != f.SHA256 || n != f.Size {
			return res, &cache.CorruptError{Key: req.Model.Key, StepID: req.Model.StepID, Path: f.Path, Problem: cache.Mismatch(f.SHA256, sum)}
		}
		size += f.Size
	}
	m := p.manifestFor(req, gate, size)
	if req.Model.Result != nil && req.Model.Result.Files["model"] != "" {
		m.Target.Artifact = published(filepath.ToSlash(req.Model.Result.Files["model"]))
	}
	if acc != nil {
		m.Metrics.Accuracy = acc.manifestAccuracy()
		m.Metrics.Checks = append(m.Metrics.Checks, manifest.Check{Name: "accuracy gate", Passed: acc.Verdict != manifest.VerdictFail,
			Detail: fmt.Sprintf("top-1 %.4f vs reference %.4f: drop %+.4f (max %.4f): %s", acc.Converted, acc.Reference, acc.Drop, acc.MaxDrop, acc.Verdict)})
		sort.SliceStable(m.Metrics.Checks, func(i, j int) bool { return m.Metrics.Checks[i].Name < m.Metrics.Checks[j].Name })
	}
	if agr != nil {
		m.Metrics.Agreement = agr.manifestAgreement()
		m.Metrics.Checks = append(m.Metrics.Checks, manifest.Check{Name: "agreement gate", Passed: agr.Verdict != manifest.VerdictFail,
			Detail: fmt.Sprintf("top-1 agreement with the fp32 model %.4f (min %.4f): %s", agr.Agreement, agr.Min, agr.Verdict)})
		sort.SliceStable(m.Metrics.Checks, func(i, j int) bool { return m.Metrics.Checks[i].Name < m.Metrics.Checks[j].Name })
	}
	m.Sidecars = []string{manifest.ProvenanceFile}
	if p.Signer != nil {
		m.Sidecars = append(m.Sidecars, manifest.SignatureFile)
	}
	if measured != nil {
		m.Metrics.Bench = measured
		fillBudgetActuals(m.Budgets, m.Metrics.Bench)
		for _, c := range budgets {
			m.Metrics.Checks = append(m.Metrics.Checks, manifest.Check{Name: c.Name, Passed: c.Passed, Detail: c.Detail})
		}
		sort.SliceStable(m.Metrics.Checks, func(i, j int) bool { return m.Metrics.Checks[i].Name < m.Metrics.Checks[j].Name })
	}
	m.Metrics.VisionBench = visionBench(req.Checks)
	m.Metrics.Generation = generation(req.Checks)
	for _, out := range req.Upstream {
		if out.LogPath == "" {
			continue
		}
		if _, err := os.Stat(out.LogPath); err != nil {
			continue
		}
		if err := copyInto(out.LogPath, filepath.Join(staging, "logs", steps.FileName(out.StepID)+".log")); err != nil {
			return res, fmt.Errorf("publish %s: %w", t.Target, err)
		}
	}
	m.Steps = append(m.Steps, manifest.Step{ID: req.StepID, Kind: "publish", KindVersion: 1, CacheKey: req.Key,
		Started: started, Finished: time.Now(), DurationS: time.Since(started).Seconds()})
	if err := manifest.WriteContext(ctx, staging, m); err != nil {
		return res, fmt.Errorf("publish %s: %w", t.Target, err)
	}
	if err := p.writeProvenance(staging, m, req.Deps); err != nil {
		return res, fmt.Errorf("publish %s: %w", t.Target, err)
	}
	if err := manifest.PublishContext(ctx, staging, final); err != nil {
		return res, fmt.Errorf("publish %s: %w", t.Target, err)
	}
	ok = true
	res.Dir = final
	p.emit(event.Event{Type: event.Published, Step: req.StepID, Target: t.Target, Path: final, Seconds: time.Since(started).Seconds()})
	return res, p.pushRemotes(ctx, req, final)
}

// publishedPath maps a path in the model step's output to the path it is
// published at. When the target names its artifact (Params.FileStem), the
// step's artifact, the file or package its "model" file is or is in, takes
// the model's name: model-q8_0.gguf -> NAME-q8_0.gguf, model.mlpackage/...
// -> NAME.mlpackage/...; everything else keeps its path. Steps keep
// writing fixed names, so a cache entry serves any model name.
func publishedPath(req *Request) func(string) string {
	same := func(p string) string { return p }
	if req.Params.FileStem == "" || req.Model.Result == nil {
		return same
	}
	top, _, _ := strings.Cut(filepath.ToSlash(req.Model.Result.Files["model"]), "/")
	rest, ok := strings.CutPrefix(top, "model")
	if !ok || rest == "" || (rest[0] != '-' && rest[0] != '.') {
		return same
	}
	named := req.Params.FileStem + rest
	for _, f := range req.Model.ContentFiles() {
		if first, _, _ := strings.Cut(f.Path, "/"); first == named {
			return same // the step wrote a file of that name too: keep both as they are
		}
	}
	return func(p string) string {
		first, after, nested := strings.Cut(p, "/")
		switch {
		case first != top:
			return p
		case nested:
			return named + "/" + after
		default:
			return named
		}
	}
}

// judge applies the target's checks: any validation a check step recorded
// as failed fails the target (a logits mismatch, a structural check), and so
// does perplexity drift over the target's max_delta, and an image
// classifier's top-1 accuracy drop over its max_drop, or top-1 agreement
// with the fp32 model under its min.
func (p *Publisher) judge(req *Request) (*GateResult, *AccuracyResult, *AgreementResult, *GateError) {
	t := req.Params
	var gate *GateResult
	var acc *AccuracyResult
	var agr *AgreementResult
	for _, in := range req.Checks {
		for _, c := range in.Result.Checks {
			if !c.Passed {
				c := c
				p.emit(event.Event{Type: event.Gate, Step: req.StepID, Target: t.Target, Message: fmt.Sprintf("check %s failed: %s", c.Name, c.Detail)})
				return gate, acc, agr, &GateError{Target: t.Target, Check: &c, Step: in.StepID}
			}
		}
		if a := judgeAgreement(t, in.StepID, in.Result.Accuracy); a != nil {
			agr = a
			p.emit(event.Event{Type: event.Gate, Step: req.StepID, Target: t.Target,
				Message: fmt.Sprintf("top-1 agreement with the fp32 model %.4f (min %.4f) -> %s", a.Agreement, a.Min, a.Verdict)})
			if a.Verdict == manifest.VerdictFail {
				return gate, acc, agr, &GateError{Target: t.Target, Agreement: agr}
			}
		}
		if a := in.Result.Accuracy; a != nil && a.Reference != nil && a.Unlabelled && accuracyGated(t) {
			return gate, acc, agr, unlabelledAccuracy(t, in.StepID)
		}
		if a := judgeAccuracy(t, in.StepID, in.Result.Accuracy); a != nil {
			acc = a
			p.emit(event.Event{Type: event.Gate, Step: req.StepID, Target: t.Target,
				Message: fmt.Sprintf("top-1 accuracy %.4f vs reference %.4f: drop %+.4f -> %s", a.Converted, a.Reference, a.Drop, a.Verdict)})
			if a.Verdict == manifest.VerdictFail {
				return gate, acc, agr, &GateError{Target: t.Target, Accuracy: acc}
			}
		}
		pp := in.Result.Perplexity
		if pp == nil || pp.Baseline == 0 {
			continue // not a comparison with the unconverted model
		}
		conv, base := pp.PPL, pp.Baseline
		warn, max := t.WarnDelta, t.MaxDelta
		d, r, v := Judge(base, conv, warn, max)
		gate = &GateResult{Target: t.Target, Baseline: base, Converted: conv, Delta: d, Ratio: r,
			WarnDelta: warn, MaxDelta: max, Verdict: v, Step: in.StepID}
		gate.withInterval(pp)
		p.emit(event.Event{Type: event.Gate, Step: req.StepID, Target: t.Target,
			Message: fmt.Sprintf("perplexity %.4f vs baseline %.4f: delta %s -> %s%s", conv, base, gate.DeltaText(), v, gate.undecided())})
		if v == manifest.VerdictFail {
			return gate, acc, agr, &GateError{Target: t.Target, Gate: gate}
		}
	}
	return gate, acc, agr, nil
}

// alreadyPublished reports whether final holds this recipe's target built
// with this publish key, with every file present at its recorded size.
func alreadyPublished(final, recipe, target, stepID, key string) bool {
	m, err := manifest.Read(final)
	if err != nil || m.Recipe.Name != recipe || m.Target.Name != target {
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

func (p *Publisher) manifestFor(req *Request, gate *GateResult, size int64) *manifest.Manifest {
	t := req.Params
	m := &manifest.Manifest{
		ManifestVersion: manifest.Version,
		EdgepipeVersion: p.Version,
		Recipe:          manifest.Recipe{Name: t.Recipe, Path: req.RecipePath},
		Target:          manifest.Target{Name: t.Target, Device: t.Device, Format: t.Format, Context: t.Context, KVDtype: t.KVDtype},
		Source:          manifest.Source{URI: getter.Redact(req.SourceURI)}, // manifests are published: no credentials
		Toolchains:      map[string]manifest.Toolchain{},
	}
	m.Recipe.SHA256 = req.RecipeSHA256
	if src := req.Source; src != nil {
		for _, f := range src.ContentFiles() {
			m.Source.Files = append(m.Source.Files, manifest.File{Path: f.Path, SHA256: f.SHA256, Size: f.Size})
		}
		if src.Result != nil {
			m.Source.ResolvedRevision = src.Result.Revision
			if f := src.Result.Facts; f[shared.FactSourceFormat] != "" {
				m.Source.Quantized = &manifest.SourceQuantization{Format: f[shared.FactSourceFormat],
					Type: f[shared.FactSourceQuantization], TensorTypes: f[shared.FactSourceTensorTypes]}
			}
		}
	}
	for _, out := range req.Upstream {
		ms := manifest.Step{ID: out.StepID, Kind: out.Kind, KindVersion: out.KindVersion, CacheKey: out.Key, CacheHit: out.CacheHit}
		if out.Result != nil {
			ms.Argv = out.Result.Argv
			if len(out.Result.Versions) > 0 {
				ms.ToolVersions = out.Result.Versions
			}
			ms.StandIn = len(out.Result.StandIns) > 0
			ms.Note = stepNote(out.Result.Facts, ms.StandIn)
			for _, c := range out.Result.Checks {
				m.Metrics.Checks = append(m.Metrics.Checks, manifest.Check{Name: out.StepID + ": " + c.Name, Passed: c.Passed, Detail: c.Detail})
			}
		}
		if !out.Started.IsZero() {
			ms.Started, ms.Finished = out.Started, out.Finished
			ms.DurationS = out.Finished.Sub(out.Started).Seconds()
		}
		for _, tool := range out.Tools {
			if name, ok := strings.CutPrefix(tool.Origin, "toolchain "); ok {
				ms.Toolchain = name
				tc := m.Toolchains[name]
				tc.LockDigest = tool.Identity
				if tc.Versions == nil {
					tc.Versions = map[string]string{}
				}
				tc.Versions[tool.Name] = tool.Version
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
	// The decode ceiling is an LLM's bound (bandwidth / bytes a token reads);
	// an image classifier has no decode loop.
	if dev, ok := catalog.Lookup(m.Target.Device); ok && size > 0 && dev.MemoryBandwidthGBs > 0 && t.DecodeCeiling {
		c := catalog.DecodeCeiling(dev.MemoryBandwidthGBs, float64(size)/1e9)
		m.Metrics.DecodeCeilingTokS = &c
	}
	m.Metrics.MemoryFit = clone(t.MemoryFit)
	m.Budgets = clone(t.Budgets)
	if gate != nil {
		var chk *steps.Output
		for _, c := range req.Checks {
			if c.StepID == gate.Step {
				chk = c
			}
		}
		p := &manifest.Perplexity{Baseline: gate.Baseline, Converted: gate.Converted, Delta: gate.Delta, Ratio: gate.Ratio,
			Verdict: gate.Verdict, WarnDelta: gate.WarnDelta, MaxDelta: gate.MaxDelta}
		if chk != nil && chk.Result.Perplexity != nil {
			cp := chk.Result.Perplexity
			p.EvalTokens, p.Context, p.Chunks, p.Backend = cp.EvalTokens, cp.Context, cp.Chunks, cp.Backend
			m.Metrics.KLDivergence, m.Metrics.Top1Agreement = cp.KLDivergence, cp.Top1Agreement
		}
		if gate.Low != nil && gate.High != nil {
			p.DeltaCI95 = &[2]float64{*gate.Low, *gate.High}
			p.Interval, p.TokensToDecide = gate.Interval, gate.TokensToDecide
		}
		m.Metrics.Perplexity = p
		m.Metrics.Checks = append(m.Metrics.Checks, manifest.Check{Name: "perplexity gate", Passed: gate.Verdict != manifest.VerdictFail,
			Detail: fmt.Sprintf("delta %s (warn %.2f, max %.2f): %s", gate.DeltaText(), gate.WarnDelta, gate.MaxDelta, gate.Verdict)})
	}
	sort.SliceStable(m.Metrics.Checks, func(i, j int) bool { return m.Metrics.Checks[i].Name < m.Metrics.Checks[j].Name })
	return m
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
		keys = append(keys, k)
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
	_, _, err := atomicfile.Copy(dst, src, 0o644)
	return err
}
