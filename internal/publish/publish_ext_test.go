package publish_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/provenance"
	. "github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/tools"
	"github.com/edgepipe/edgepipe/steps"

	// The device catalog (the decode ceiling) names every built-in
	// family's formats.
	_ "github.com/edgepipe/edgepipe/pipelines"
)

func sha(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

// output writes files into a fresh folder and returns a cached step's
// record of them, as the engine hands it to the publisher.
func output(t *testing.T, id, kind string, files map[string]string, res *steps.Result) *steps.Output {
	t.Helper()
	dir := t.TempDir()
	var fds []digest.FileDigest
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		fds = append(fds, digest.FileDigest{Path: name, SHA256: sha(body), Size: int64(len(body))})
	}
	sort.Slice(fds, func(i, j int) bool { return fds[i].Path < fds[j].Path })
	if res == nil {
		res = &steps.Result{}
	}
	return &steps.Output{StepID: id, Kind: kind, KindVersion: 1, Dir: dir, Key: "key-" + id, Digest: "digest-" + id,
		Files: fds, Result: res, CacheHit: true, LogPath: filepath.Join(dir, steps.LogFile)}
}

// check is a quality step's record: the converted model's perplexity
// against the baseline's.
func check(t *testing.T, ppl, baseline float64) *steps.Output {
	return output(t, "perplexity:t1", "perplexity", map[string]string{steps.LogFile: "scored\n"},
		&steps.Result{Perplexity: &steps.Perplexity{PPL: ppl, Baseline: baseline, EvalTokens: 4096, Context: 512, Chunks: 8, Backend: "llama.cpp"}})
}

// pubFixture is a publisher into a temp folder that keeps its events.
type pubFixture struct {
	*Publisher
	events []event.Event
}

func newPublisher(t *testing.T) *pubFixture {
	f := &pubFixture{}
	f.Publisher = &Publisher{OutDir: t.TempDir(), Version: "test-1",
		Run:  provenance.Run{InvocationID: "urn:uuid:00000000-0000-4000-8000-000000000000", StartedOn: time.Now()},
		Emit: func(ev event.Event) { f.events = append(f.events, ev) }}
	return f
}

func (f *pubFixture) eventsOf(typ string) []event.Event {
	var out []event.Event
	for _, ev := range f.events {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func params() *Params {
	return &Params{Recipe: "rec", Target: "t1", Device: "x86-laptop", Format: "gguf-q8_0", Context: 2048, KVDtype: "f16",
		DecodeCeiling: true, WarnDelta: 0.5, MaxDelta: 2}
}

// request is target t1's publish of a one-file model with the given
// checks; the source is a fetched checkpoint.
func request(t *testing.T, p *Params, checks ...*steps.Output) *Request {
	t.Helper()
	model := output(t, "gguf-quantize:q8_0", "gguf-quantize",
		map[string]string{"model-q8_0.gguf": "GGUF q8 weights", steps.ResultFile: `{"files":{"model":"model-q8_0.gguf"}}`, steps.LogFile: "quantized\n"},
		&steps.Result{Files: map[string]string{"model": "model-q8_0.gguf"}, Argv: [][]string{{"llama-quantize", "in.gguf", "Q8_0"}}})
	src := output(t, "source", "fetch", map[string]string{"config.json": "{}", "model.safetensors": "weights"},
		&steps.Result{Revision: "0123abcd"})
	up := append([]*steps.Output{src, model}, checks...)
	return &Request{StepID: "publish:t1", Params: p, RecipePath: "/recipes/rec.yaml", RecipeSHA256: sha("recipe"),
		SourceURI: "https://user:hunter2@models.example.com/m.tar", Model: model, Checks: checks, Upstream: up, Source: src, Key: "pubkey-1"}
}

func TestJudgeEdges(t *testing.T) {
	for _, tc := range []struct {
		baseline, converted float64
		want                string
	}{
		{10, 10.2, manifest.VerdictExcellent},
		{10, 9.5, manifest.VerdictExcellent}, // better than the baseline
		{10, 10.5, manifest.VerdictOK},       // delta == warn_delta is not under it
		{10, 11, manifest.VerdictOK},
		{10, 12, manifest.VerdictOK}, // delta == max_delta is not over it
		{10, 12.0001, manifest.VerdictFail},
		{10, math.NaN(), manifest.VerdictFail},
		// A baseline that is not a number compares with nothing: its
		// delta is NaN, which is neither over max_delta nor under
		// warn_delta, and must not pass as ok.
		{math.NaN(), 10, manifest.VerdictFail},
		{math.Inf(1), 10, manifest.VerdictFail},
		{10, math.Inf(-1), manifest.VerdictFail},
	} {
		d, r, v := Judge(tc.baseline, tc.converted, 0.5, 2)
		if v != tc.want {
			t.Errorf("Judge(%g, %g) = %s, want %s", tc.baseline, tc.converted, v, tc.want)
		}
		if v != manifest.VerdictFail && (d != tc.converted-tc.baseline || r != tc.converted/tc.baseline) {
			t.Errorf("Judge(%g, %g): delta %g ratio %g", tc.baseline, tc.converted, d, r)
		}
	}
}

func TestJudgeAccuracyEdges(t *testing.T) {
	for _, tc := range []struct {
		ref, conv, max float64
		want           string
	}{
		{0.80, 0.81, 0.01, manifest.VerdictExcellent},
		{0.80, 0.80, 0.01, manifest.VerdictExcellent}, // no drop
		{0.80, 0.79, 0.01, manifest.VerdictOK},        // a drop of exactly max_drop, in floating point
		{0.80, 0.7899, 0.01, manifest.VerdictFail},
		{math.NaN(), 0.80, 0.01, manifest.VerdictFail},
		{0.80, math.NaN(), 0.01, manifest.VerdictFail},
	} {
		if _, v := JudgeAccuracy(tc.ref, tc.conv, tc.max); v != tc.want {
			t.Errorf("JudgeAccuracy(%g, %g, %g) = %s, want %s", tc.ref, tc.conv, tc.max, v, tc.want)
		}
	}
	if JudgeAgreement(math.NaN(), 0.5) != manifest.VerdictFail {
		t.Error("a NaN agreement passed")
	}
}

// A perplexity over max_delta fails the target: nothing is published,
// the gate is reported, and the error says what to do.
func TestPerplexityGateFails(t *testing.T) {
	p := newPublisher(t)
	res, err := p.Publish(context.Background(), request(t, params(), check(t, 12.5, 10)))
	var ge *GateError
	if !errors.As(err, &ge) || ge.Gate == nil || ge.Target != "t1" {
		t.Fatalf("err = %v, want the perplexity gate's failure", err)
	}
	if !strings.Contains(err.Error(), "delta of +2.5000, over max_delta 2.00; nothing was published") {
		t.Errorf("message: %s", err)
	}
	if res.Gate == nil || res.Gate.Verdict != manifest.VerdictFail || res.Gate.Step != "perplexity:t1" || res.Dir != "" {
		t.Errorf("result %+v gate %+v", res, res.Gate)
	}
	if _, err := os.Stat(p.Dir("t1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a target that failed its gate has a folder: %v", err)
	}
	if evs := p.eventsOf(event.Gate); len(evs) != 1 || !strings.Contains(evs[0].Message, "-> fail") {
		t.Errorf("gate events %+v", evs)
	}
}

// A check a step recorded as failed fails the target before perplexity
// is judged; a check step that compares with nothing (no baseline) is
// not a perplexity gate.
func TestFailedCheckFailsTheTarget(t *testing.T) {
	logits := output(t, "validate:q8_0", "validate", nil, &steps.Result{Checks: []steps.Check{
		{Name: "loads", Passed: true}, {Name: "logits", Passed: false, Detail: "max abs diff 3.1 over 0.5"}}})
	p := newPublisher(t)
	_, err := p.Publish(context.Background(), request(t, params(), logits, check(t, 10.1, 10)))
	var ge *GateError
	if !errors.As(err, &ge) || ge.Check == nil || ge.Check.Name != "logits" || ge.Step != "validate:q8_0" || ge.Gate != nil {
		t.Fatalf("err = %v (%+v), want check logits of validate:q8_0", err, ge)
	}
	if !strings.Contains(err.Error(), `check "logits" of step validate:q8_0 failed: max abs diff 3.1 over 0.5; nothing was published`) {
		t.Errorf("message: %s", err)
	}
	if _, err := os.Stat(p.Dir("t1")); !errors.Is(err, os.ErrNotExist) {
		t.Error("published despite a failed check")
	}

	noBaseline := check(t, 10.1, 0)
	res, err := newPublisher(t).Publish(context.Background(), request(t, params(), noBaseline))
	if err != nil || res.Gate != nil || res.Dir == "" {
		t.Errorf("a score without a baseline: gate %+v, dir %q, %v", res.Gate, res.Dir, err)
	}
}

// An image classifier's accuracy and agreement gates, from the params:
// the one set is judged, the one not set is not, and each is recorded.
func TestAccuracyAndAgreementGates(t *testing.T) {
	ref, agree := 0.80, 0.985
	vision := func(top1 float64) *steps.Output {
		return output(t, "vision-eval:int8", "vision-eval", nil, &steps.Result{Accuracy: &steps.Accuracy{
			Top1: top1, Images: 200, Reference: &ref, Agreement: &agree, Backend: "onnxruntime", ReferenceBackend: "torch"}})
	}
	vp := func(maxDrop, minAgree *float64) *Params {
		return &Params{Recipe: "rec", Target: "t1", Device: "x86-laptop", Format: "onnx-int8", MaxAccuracyDrop: maxDrop, MinAgreement: minAgree}
	}
	drop, min := 0.01, 0.98

	res, err := newPublisher(t).Publish(context.Background(), request(t, vp(&drop, nil), vision(0.79)))
	if err != nil || res.Accuracy == nil || res.Accuracy.Verdict != manifest.VerdictOK || res.Agreement != nil {
		t.Fatalf("a drop of max_drop: accuracy %+v agreement %+v, %v", res.Accuracy, res.Agreement, err)
	}
	m, err := manifest.Read(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if a := m.Metrics.Accuracy; a == nil || a.Images != 200 || a.Backend != "onnxruntime" || a.ReferenceBackend != "torch" || a.MaxDrop != drop || *a.Agreement != agree {
		t.Errorf("manifest accuracy %+v", a)
	}
	if !hasCheck(m, "accuracy gate", true) || m.Metrics.Agreement != nil {
		t.Errorf("manifest checks %+v, agreement %+v", m.Metrics.Checks, m.Metrics.Agreement)
	}

	_, err = newPublisher(t).Publish(context.Background(), request(t, vp(&drop, nil), vision(0.7899)))
	var ge *GateError
	if !errors.As(err, &ge) || ge.Accuracy == nil || !strings.Contains(err.Error(), "over max_drop 1.00 points") {
		t.Errorf("a drop over max_drop: %v", err)
	}

	res, err = newPublisher(t).Publish(context.Background(), request(t, vp(nil, &min), vision(0.10)))
	if err != nil || res.Accuracy != nil || res.Agreement == nil || res.Agreement.Verdict != manifest.VerdictOK {
		t.Fatalf("agreement only: accuracy %+v agreement %+v, %v", res.Accuracy, res.Agreement, err)
	}
	if m, err = manifest.Read(res.Dir); err != nil {
		t.Fatal(err)
	}
	if a := m.Metrics.Agreement; a == nil || a.Agreement != agree || a.Min != min || !a.Labelled || a.Images != 200 || m.Metrics.Accuracy != nil {
		t.Errorf("manifest agreement %+v accuracy %+v", a, m.Metrics.Accuracy)
	}

	strict := 0.99
	_, err = newPublisher(t).Publish(context.Background(), request(t, vp(nil, &strict), vision(0.80)))
	if !errors.As(err, &ge) || ge.Agreement == nil || ge.Agreement.Verdict != manifest.VerdictFail {
		t.Errorf("agreement under min: %v", err)
	}
}

func hasCheck(m *manifest.Manifest, name string, passed bool) bool {
	return slices.ContainsFunc(m.Metrics.Checks, func(c manifest.Check) bool { return c.Name == name && c.Passed == passed })
}

// bench is a bench step's record of a measurement on this host.
func bench(t *testing.T, decode, firstTokenMS float64) *steps.Output {
	return output(t, "bench:gguf-quantize:q8_0", "bench", nil, &steps.Result{Bench: &manifest.Bench{
		Backend: "llama.cpp", Host: "testhost", WarmupRuns: 1, TimedRuns: 3, PromptTokens: 128,
		DecodeTokS: decode, FirstTokenMS: firstTokenMS}})
}

func budgeted() *Params {
	p := params()
	p.MinTokensPerS, p.MaxFirstTokenMS = 50, 200
	predicted := 60.0
	p.Budgets = &manifest.Budgets{MinTokensPerS: &manifest.Budget{Limit: 50, Predicted: &predicted}, MaxFirstTokenMS: &manifest.Budget{Limit: 200}}
	return p
}

// Speed budgets are judged on the bench: at the limit passes, under it
// fails the target with the budget's check.
func TestBudgetsGate(t *testing.T) {
	_, err := newPublisher(t).Publish(context.Background(), request(t, budgeted(), check(t, 10.1, 10), bench(t, 49.9, 100)))
	var ge *GateError
	if !errors.As(err, &ge) || ge.Check == nil || ge.Check.Name != "budget min_tokens_per_s" || ge.Step != "bench:gguf-quantize:q8_0" {
		t.Fatalf("decode under min_tokens_per_s: %v", err)
	}
	_, err = newPublisher(t).Publish(context.Background(), request(t, budgeted(), check(t, 10.1, 10), bench(t, 80, 200.5)))
	if !errors.As(err, &ge) || ge.Check == nil || ge.Check.Name != "budget max_first_token_ms" {
		t.Fatalf("first token over max_first_token_ms: %v", err)
	}
	res, err := newPublisher(t).Publish(context.Background(), request(t, budgeted(), check(t, 10.1, 10), bench(t, 50, 200)))
	if err != nil || res.Dir == "" {
		t.Fatalf("at the limits: %v", err)
	}
}

// The manifest records the budgets and the memory fit the plan wrote,
// with what the bench measured beside them, without writing those
// measurements into the params (the plan's record, which keys the
// publish).
func TestBudgetActualsDoNotWriteIntoTheParams(t *testing.T) {
	p := budgeted()
	p.MemoryFit = &manifest.MemoryFit{Device: "x86-laptop", WeightsBytes: 1 << 30, TotalBytes: 2 << 30, AvailableBytes: 12 << 30, Fits: true}
	res, err := newPublisher(t).Publish(context.Background(), request(t, p, check(t, 10.1, 10), bench(t, 70, 150)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Budgets.MinTokensPerS.Actual != nil || p.Budgets.MaxFirstTokenMS.Actual != nil {
		t.Error("publishing wrote the measured actuals into the params' budgets")
	}
	if *p.Budgets.MinTokensPerS.Predicted != 60 {
		t.Error("publishing changed the params' prediction")
	}
	m, err := manifest.Read(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	b := m.Budgets
	if b == nil || b.MinTokensPerS.Limit != 50 || *b.MinTokensPerS.Predicted != 60 || *b.MinTokensPerS.Actual != 70 ||
		b.MaxFirstTokenMS.Limit != 200 || *b.MaxFirstTokenMS.Actual != 150 || b.MaxMemoryGB != nil {
		t.Errorf("manifest budgets %+v", b)
	}
	if mf := m.Metrics.MemoryFit; mf == nil || *mf != *p.MemoryFit {
		t.Errorf("manifest memory fit %+v, want %+v", mf, p.MemoryFit)
	}
	if bm := m.Metrics.Bench; bm == nil || bm.DecodeTokS != 70 || bm.Host != "testhost" {
		t.Errorf("manifest bench %+v", bm)
	}
	if !hasCheck(m, "budget min_tokens_per_s", true) || !hasCheck(m, "budget max_first_token_ms", true) {
		t.Errorf("manifest checks %+v", m.Metrics.Checks)
	}
}

// What the manifest records of a publish: the target, the source (no
// credentials), every upstream step with its tools and checks, the
// toolchains, the size, the decode ceiling, the perplexity gate.
func TestManifestContents(t *testing.T) {
	kl, top1 := 0.012, 0.97
	chk := check(t, 10.3, 10)
	chk.Result.Perplexity.KLDivergence, chk.Result.Perplexity.Top1Agreement = &kl, &top1
	chk.Result.StandIns = []string{"llama-perplexity"}
	chk.Result.SetFact("backend_note", "cpu")
	chk.Result.Checks = []steps.Check{{Name: "vocab", Passed: true}, {Name: "finite", Passed: true, Detail: "no NaN logits"}}
	req := request(t, params(), chk)
	req.Source.Result.SetFact("source_format", "gguf")
	req.Source.Result.SetFact("source_quantization", "Q4_K_M")
	req.Model.Result.SetVersion("llama-quantize", "b4000")
	started := time.Now().Add(-time.Minute)
	req.Model.Started, req.Model.Finished, req.Model.CacheHit = started, started.Add(30*time.Second), false
	req.Model.Tools = []*tools.Tool{{Name: "llama-quantize", Identity: "lock-llama", Version: "b4000", Origin: "toolchain llama.cpp"}}
	chk.Tools = []*tools.Tool{{Name: "llama-perplexity", Identity: "sha256:" + sha("x"), Version: "stand-in", Origin: "tool-path"}}

	p := newPublisher(t)
	res, err := p.Publish(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.EdgepipeVersion != "test-1" || m.Recipe != (manifest.Recipe{Name: "rec", Path: "/recipes/rec.yaml", SHA256: sha("recipe")}) {
		t.Errorf("version %q recipe %+v", m.EdgepipeVersion, m.Recipe)
	}
	if m.Target != (manifest.Target{Name: "t1", Device: "x86-laptop", Format: "gguf-q8_0", Context: 2048, KVDtype: "f16", Artifact: "model-q8_0.gguf"}) {
		t.Errorf("target %+v", m.Target)
	}
	if strings.Contains(m.Source.URI, "hunter2") || !strings.Contains(m.Source.URI, "models.example.com/m.tar") {
		t.Errorf("source uri %q", m.Source.URI)
	}
	if m.Source.ResolvedRevision != "0123abcd" || len(m.Source.Files) != 2 || m.Source.Files[0].Path != "config.json" {
		t.Errorf("source %+v", m.Source)
	}
	if q := m.Source.Quantized; q == nil || q.Format != "gguf" || q.Type != "Q4_K_M" {
		t.Errorf("source quantization %+v", q)
	}
	var ids []string
	for _, s := range m.Steps {
		ids = append(ids, s.ID)
	}
	if want := []string{"source", "gguf-quantize:q8_0", "perplexity:t1", "publish:t1"}; !slices.Equal(ids, want) {
		t.Fatalf("steps %v, want %v", ids, want)
	}
	q := m.Steps[1]
	if q.Kind != "gguf-quantize" || q.CacheKey != "key-gguf-quantize:q8_0" || q.CacheHit || q.Toolchain != "llama.cpp" ||
		q.ToolVersions["llama-quantize"] != "b4000" || len(q.Argv) != 1 || q.DurationS != 30 || q.StandIn {
		t.Errorf("model step %+v", q)
	}
	s := m.Steps[2]
	if !s.StandIn || !s.CacheHit || s.Toolchain != "" || !strings.Contains(s.Note, "stand-in") || !strings.Contains(s.Note, "backend_note: cpu") {
		t.Errorf("check step %+v", s)
	}
	if pub := m.Steps[3]; pub.Kind != "publish" || pub.CacheKey != "pubkey-1" {
		t.Errorf("publish step %+v", pub)
	}
	if tc := m.Toolchains["llama.cpp"]; len(m.Toolchains) != 1 || tc.LockDigest != "lock-llama" || tc.Versions["llama-quantize"] != "b4000" {
		t.Errorf("toolchains %+v: want llama.cpp alone (a tool-path tool is provenance's)", m.Toolchains)
	}
	if m.Metrics.SizeBytes == nil || *m.Metrics.SizeBytes != int64(len("GGUF q8 weights")) {
		t.Errorf("size %v", m.Metrics.SizeBytes)
	}
	if m.Metrics.DecodeCeilingTokS == nil || *m.Metrics.DecodeCeilingTokS <= 0 {
		t.Errorf("decode ceiling %v", m.Metrics.DecodeCeilingTokS)
	}
	pp := m.Metrics.Perplexity
	if pp == nil || pp.Baseline != 10 || pp.Converted != 10.3 || pp.Verdict != manifest.VerdictExcellent || pp.MaxDelta != 2 ||
		pp.EvalTokens != 4096 || pp.Chunks != 8 || pp.Backend != "llama.cpp" {
		t.Errorf("perplexity %+v", pp)
	}
	if m.Metrics.KLDivergence == nil || *m.Metrics.KLDivergence != kl || *m.Metrics.Top1Agreement != top1 {
		t.Errorf("kl %v top1 %v", m.Metrics.KLDivergence, m.Metrics.Top1Agreement)
	}
	var checks []string
	for _, c := range m.Metrics.Checks {
		checks = append(checks, c.Name)
	}
	if want := []string{"perplexity gate", "perplexity:t1: finite", "perplexity:t1: vocab"}; !slices.Equal(checks, want) {
		t.Errorf("checks %v, want %v (sorted, each step's named)", checks, want)
	}
	var files []string
	for _, f := range m.Files {
		files = append(files, f.Path)
	}
	if !slices.Contains(files, "model-q8_0.gguf") || slices.Contains(files, steps.ResultFile) {
		t.Errorf("files %v: want the model, not its result record", files)
	}
	if !slices.Contains(files, "logs/perplexity_t1.log") || !slices.Contains(files, "logs/gguf-quantize_q8_0.log") {
		t.Errorf("files %v: want the steps' logs", files)
	}

	// An image classifier (no decode loop) records no decode ceiling.
	np := params()
	np.DecodeCeiling = false
	res, err = newPublisher(t).Publish(context.Background(), request(t, np, check(t, 10.3, 10)))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := manifest.Read(res.Dir); m.Metrics.DecodeCeilingTokS != nil {
		t.Errorf("a target without a decode loop has a decode ceiling %v", *m.Metrics.DecodeCeilingTokS)
	}
}

// A folder holding this build (same recipe, target and publish key, files
// at their sizes, provenance present) is current and left alone; any
// difference publishes again.
func TestCurrentAndAlreadyPublished(t *testing.T) {
	p := newPublisher(t)
	req := request(t, params(), check(t, 10.1, 10))
	if p.Current(req) {
		t.Fatal("current before anything was published")
	}
	res, err := p.Publish(context.Background(), req)
	if err != nil || res.Cached {
		t.Fatalf("first publish: cached %v, %v", res.Cached, err)
	}
	if !p.Current(req) {
		t.Fatal("not current right after publishing")
	}
	p.events = nil
	res, err = p.Publish(context.Background(), req)
	if err != nil || !res.Cached || res.Dir != p.Dir("t1") {
		t.Errorf("second publish: %+v, %v", res, err)
	}
	if evs := p.eventsOf(event.Cached); len(evs) != 1 || evs[0].Message != "already published" || len(p.eventsOf(event.Published)) != 0 {
		t.Errorf("second publish events %+v", p.events)
	}

	other := *req
	other.Key = "pubkey-2"
	if p.Current(&other) {
		t.Error("current for another publish key")
	}
	op := *req.Params
	op.Recipe = "another-recipe"
	other = *req
	other.Params = &op
	if p.Current(&other) {
		t.Error("current for another recipe")
	}
	otherStep := *req
	otherStep.StepID = "publish:t2"
	if p.Current(&otherStep) {
		t.Error("current for another publish step")
	}

	p.events = nil
	p.Force = true
	if res, err := p.Publish(context.Background(), req); err != nil || res.Cached || len(p.eventsOf(event.Published)) != 1 {
		t.Errorf("forced publish: %+v, %v", res, err)
	}
	p.Force = false

	model := filepath.Join(p.Dir("t1"), "model-q8_0.gguf")
	if err := os.Truncate(model, 3); err != nil {
		t.Fatal(err)
	}
	if p.Current(req) {
		t.Error("current with a truncated model")
	}
	if res, err := p.Publish(context.Background(), req); err != nil || res.Cached {
		t.Fatalf("republish: %+v, %v", res, err)
	}
	if b, _ := os.ReadFile(model); string(b) != "GGUF q8 weights" {
		t.Errorf("republished model %q", b)
	}
	if err := os.Remove(filepath.Join(p.Dir("t1"), manifest.ProvenanceFile)); err != nil {
		t.Fatal(err)
	}
	if p.Current(req) {
		t.Error("current without its provenance")
	}
}

// A folder of another recipe (or not an artifact at all) is never
// replaced: the publish refuses and leaves it as it was.
func TestRefusesToReplaceAnotherRecipesFolder(t *testing.T) {
	p := newPublisher(t)
	op := params()
	op.Recipe = "someone-else"
	if _, err := p.Publish(context.Background(), request(t, op, check(t, 10.1, 10))); err != nil {
		t.Fatal(err)
	}
	_, err := p.Publish(context.Background(), request(t, params(), check(t, 10.1, 10)))
	var re *manifest.ReplaceError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), `holds the artifact of recipe "someone-else" target "t1"`) {
		t.Fatalf("err = %v, want a refusal to replace", err)
	}
	if m, err := manifest.Read(p.Dir("t1")); err != nil || m.Recipe.Name != "someone-else" {
		t.Errorf("the other recipe's folder changed: %+v, %v", m, err)
	}

	p = newPublisher(t)
	if err := os.MkdirAll(p.Dir("t1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.Dir("t1"), "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(context.Background(), request(t, params(), check(t, 10.1, 10))); !errors.As(err, &re) {
		t.Errorf("a folder that is no artifact: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(p.Dir("t1"), "notes.txt")); string(b) != "mine" {
		t.Error("a folder that is no artifact was changed")
	}
}

// A model whose bytes are not the ones its cache record lists (damaged
// after its step ran) is not published: the copy hashes what it copies
// and says which file of which entry differs, so the engine can rebuild.
func TestCorruptModelIsNotPublished(t *testing.T) {
	p := newPublisher(t)
	req := request(t, params(), check(t, 10.1, 10))
	path := filepath.Join(req.Model.Dir, "model-q8_0.gguf")
	if err := os.WriteFile(path, []byte("GGUF q8 weighTs"), 0o644); err != nil { // same size
		t.Fatal(err)
	}
	_, err := p.Publish(context.Background(), req)
	var ce *cache.CorruptError
	if !errors.As(err, &ce) || ce.Key != "key-gguf-quantize:q8_0" || ce.StepID != "gguf-quantize:q8_0" || ce.Path != "model-q8_0.gguf" {
		t.Fatalf("err = %v (%+v), want the model's corruption", err, ce)
	}
	if !strings.Contains(ce.Problem, "has sha256 "+sha("GGUF q8 weighTs")[:16]+", the record says "+sha("GGUF q8 weights")[:16]) {
		t.Errorf("problem %q", ce.Problem)
	}
	ents, _ := os.ReadDir(p.OutDir)
	if len(ents) != 0 {
		t.Errorf("a refused publish left %v in the output folder", ents)
	}
}

// A gate failure next to an earlier run's folder leaves that folder and
// says it is not this recipe's result.
func TestGateFailureNamesTheEarlierFolder(t *testing.T) {
	p := newPublisher(t)
	if _, err := p.Publish(context.Background(), request(t, params(), check(t, 10.1, 10))); err != nil {
		t.Fatal(err)
	}
	_, err := p.Publish(context.Background(), request(t, params(), check(t, 13, 10)))
	var ge *GateError
	if !errors.As(err, &ge) || ge.Earlier != p.Dir("t1") || !strings.Contains(err.Error(), "still holds an earlier run's artifacts") {
		t.Fatalf("err = %v", err)
	}
	if _, err := manifest.Read(p.Dir("t1")); err != nil {
		t.Errorf("the earlier folder: %v", err)
	}
}

// Pushing happens after the local publish and never undoes it; NoPush
// skips the remotes.
func TestPushFailureKeepsTheLocalFolder(t *testing.T) {
	p := newPublisher(t)
	req := request(t, params(), check(t, 10.1, 10))
	req.Remotes = []Remote{{URL: "ftp://nowhere/x"}}
	res, err := p.Publish(context.Background(), req)
	if !IsPushFailure(err) || res.Dir == "" {
		t.Fatalf("dir %q, err %v: want a push failure after the publish", res.Dir, err)
	}
	if _, err := manifest.Read(res.Dir); err != nil {
		t.Errorf("the local folder after a failed push: %v", err)
	}
	p.NoPush = true
	if _, err := p.Publish(context.Background(), req); err != nil {
		t.Errorf("NoPush still pushed: %v", err)
	}
}

// A target that names its artifact publishes the model step's file, or the
// package it is in, under the model's name; the rest keeps its paths, the
// manifest says which file is the artifact, and a rerun finds it current.
func TestPublishedUnderModelName(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		p := params()
		p.FileStem = "SmolLM2-135M"
		req := request(t, p, check(t, 10, 10))
		pub := newPublisher(t)
		res, err := pub.Publish(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Read(res.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if m.Target.Artifact != "SmolLM2-135M-q8_0.gguf" {
			t.Errorf("artifact %q", m.Target.Artifact)
		}
		if b, err := os.ReadFile(filepath.Join(res.Dir, "SmolLM2-135M-q8_0.gguf")); err != nil || string(b) != "GGUF q8 weights" {
			t.Errorf("published file: %q, %v", b, err)
		}
		if _, err := os.Stat(filepath.Join(res.Dir, "model-q8_0.gguf")); err == nil {
			t.Error("the step's name was published too")
		}
		if !pub.Current(req) {
			t.Error("a rerun of the same publish is not current")
		}
		if probs, err := manifest.Verify(res.Dir); err != nil || len(probs) > 0 {
			t.Errorf("verify: %v %v", probs, err)
		}
	})
	t.Run("package", func(t *testing.T) {
		p := params()
		p.Format, p.FileStem = "coreml-int4", "tiny"
		req := request(t, p, check(t, 10, 10))
		req.Model = output(t, "coreml-convert:t1", "coreml-convert", map[string]string{
			"model.mlpackage/Manifest.json":           "{}",
			"model.mlpackage/Data/weights/weight.bin": "w",
			"tokenizer.json":                          "{}",
		}, &steps.Result{Files: map[string]string{"model": "model.mlpackage"}})
		res, err := newPublisher(t).Publish(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"tiny.mlpackage/Manifest.json", "tiny.mlpackage/Data/weights/weight.bin", "tokenizer.json"} {
			if _, err := os.Stat(filepath.Join(res.Dir, filepath.FromSlash(f))); err != nil {
				t.Error(err)
			}
		}
		if m, err := manifest.Read(res.Dir); err != nil || m.Target.Artifact != "tiny.mlpackage" {
			t.Errorf("artifact: %+v, %v", m, err)
		}
	})
	t.Run("fixed names stay", func(t *testing.T) {
		// A step whose artifact is not called model* (a folder format's
		// config file) keeps every name, stem or not.
		p := params()
		p.FileStem = "tiny"
		req := request(t, p, check(t, 10, 10))
		req.Model = output(t, "mlc-convert:t1", "mlc-convert", map[string]string{
			"mlc-chat-config.json": "{}", "model.wasm": "wasm",
		}, &steps.Result{Files: map[string]string{"model": "mlc-chat-config.json"}})
		res, err := newPublisher(t).Publish(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"mlc-chat-config.json", "model.wasm"} {
			if _, err := os.Stat(filepath.Join(res.Dir, f)); err != nil {
				t.Error(err)
			}
		}
	})
}
