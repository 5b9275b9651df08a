package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/runstats"

	"github.com/edgepipe/edgepipe/internal/tools"

	"github.com/edgepipe/edgepipe/internal/event"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/dag"
	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/proc"
	"github.com/edgepipe/edgepipe/internal/provenance"
	"github.com/edgepipe/edgepipe/internal/toolprogress"
	"github.com/edgepipe/edgepipe/steps"
)

// Options configure a run.
type Options struct {
	Cache *cache.Cache
	// OutDir is where targets are published: OutDir/<target>/.
	OutDir      string
	Jobs        int
	MaxMemoryMB int64
	KeepGoing   bool
	// Force reruns every step, ignoring cache hits (results still land in
	// the cache).
	Force bool
	// Verify rehashes every input and cached output instead of trusting
	// the stat memo.
	Verify  bool
	Tools   *tools.Resolver
	Data    func(ref string) (string, error)
	OnEvent func(event.Event)
	// OnProgress receives byte progress of long transfers, by step.
	OnProgress func(step, label string, done, total int64)
	// OnToolProgress receives the progress a step's tool prints (tensors
	// quantized, chunks scored), read from its output as it runs.
	OnToolProgress func(step, tool string, done, total int64)
	// Verbose copies child output here as well as to the step logs.
	Verbose io.Writer
	Version string
	// Only runs just these steps (and fails if their needs are not cached).
	Only []string
	// Signer signs each target's provenance; nil leaves it unsigned.
	Signer *provenance.Signer
	// Run identifies this invocation in provenance; NewEngine fills an
	// empty InvocationID and StartedOn.
	Run provenance.Run
	// NoPush publishes locally only, skipping the targets' remotes.
	NoPush bool
	// Remote is a shared remote cache (nil: none): looked up after a local
	// miss, and given every output this run makes or finds.
	Remote RemoteCache
	// RemoteStrict makes a failed upload to Remote a failure of the step.
	RemoteStrict bool
	// Dispatch runs the steps that miss both caches on other machines
	// (Ray) instead of here; their outputs come back through Remote.
	Dispatch Dispatcher
}

// Engine runs a plan against the cache.
type Engine struct {
	plan *plan.Plan
	opt  Options

	mu      sync.Mutex
	outputs map[string]*steps.Output
	keys    map[string]string
	// verified holds the keys whose cached outputs were rehashed in this
	// run; rebuilding serializes rebuilds of one step.
	verified   map[string]bool
	rebuilding map[string]*sync.Mutex
	failures   map[string]error
	events     sync.Mutex

	statsOnce     sync.Once
	statsStore    *runstats.Store
	modelSize     atomic.Int64 // model.source's bytes, once fetched
	largestTensor atomic.Int64 // its largest tensor's bytes, set with modelSize

	phaseMu   sync.Mutex
	phaseSums map[string]time.Duration
}

// NewEngine prepares a plan for running.
func NewEngine(p *plan.Plan, opt Options) *Engine {
	if opt.Tools == nil {
		opt.Tools = &tools.Resolver{}
	}
	if opt.Tools.Memo == nil {
		opt.Tools.Memo = opt.Cache.Memo()
	}
	if opt.Run.InvocationID == "" {
		opt.Run.InvocationID = newInvocationID()
	}
	if opt.Run.StartedOn.IsZero() {
		opt.Run.StartedOn = time.Now()
	}
	return &Engine{plan: p, opt: opt, outputs: map[string]*steps.Output{}, keys: map[string]string{},
		verified: map[string]bool{}, rebuilding: map[string]*sync.Mutex{}, failures: map[string]error{}}
}

func (e *Engine) emit(ev event.Event) {
	if e.opt.OnEvent == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	e.events.Lock()
	defer e.events.Unlock()
	e.opt.OnEvent(ev)
}

// StepError is a step that failed; it carries the log's path and last lines.
type StepError struct {
	Step    string
	LogPath string
	Err     error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("step %s failed: %v", e.Step, e.Err)
}
func (e *StepError) Unwrap() error { return e.Err }

// RunResult is what a run did.
type RunResult struct {
	Outputs   map[string]*steps.Output
	Published map[string]string // target -> folder
	Gates     map[string]*publish.GateResult
	// Accuracy holds image classifiers' gates, by target.
	Accuracy map[string]*publish.AccuracyResult
	// Agreement holds image classifiers' agreement gates, by target.
	Agreement map[string]*publish.AgreementResult
	Failed    []error // root causes only
	Skipped   []string
	// Stopped maps each skipped step that needed nothing that failed to
	// the failure after which fail-fast stopped launching work.
	Stopped map[string]string
}

// Run executes the plan. Its error is the first root cause (or the
// context's error when interrupted); RunResult lists them all.
func (e *Engine) Run(ctx context.Context) (*RunResult, error) {
	res := &RunResult{Outputs: e.outputs, Published: map[string]string{}, Gates: map[string]*publish.GateResult{},
		Accuracy: map[string]*publish.AccuracyResult{}, Agreement: map[string]*publish.AgreementResult{}, Stopped: map[string]string{}}
	var nodes []dag.Node
	var pubMu sync.Mutex
	only := map[string]bool{}
	for _, id := range e.opt.Only {
		only[id] = true
	}
	for _, s := range e.plan.Steps {
		s := s
		if len(only) > 0 && !only[s.ID] {
			continue
		}
		cores, minCores := 1, 0
		var rsrc steps.Resources
		if k, ok := steps.Lookup(s.Kind); ok {
			rsrc = k.Resources(s.Params)
			cores, minCores = rsrc.Cores, rsrc.MinCores
		}
		// Weighed when ready: by then the source is fetched and its size
		// known.
		memory := func() int64 {
			mb, _ := e.predictMemory(s.Kind, rsrc, e.model(ctx, false))
			return mb
		}
		var needs []string
		for _, n := range s.Needs {
			if len(only) == 0 || only[n] {
				needs = append(needs, n)
			}
		}
		nodes = append(nodes, dag.Node{ID: s.ID, Needs: needs, Cores: cores, MinCores: minCores, Memory: memory,
			Estimate: e.stats().Duration(statsKey(e.plan, s.ID)),
			Run: func(ctx context.Context) error {
				if s.Kind == "publish" {
					done := e.phase(PhasePublish)
					pr, err := e.publish(ctx, s)
					done()
					if pr != nil {
						pubMu.Lock()
						if pr.Gate != nil {
							res.Gates[s.Target] = pr.Gate
						}
						if pr.Accuracy != nil {
							res.Accuracy[s.Target] = pr.Accuracy
						}
						if pr.Agreement != nil {
							res.Agreement[s.Target] = pr.Agreement
						}
						if pr.Dir != "" {
							res.Published[s.Target] = pr.Dir
						}
						pubMu.Unlock()
					}
					return err
				}
				return e.runStep(ctx, s)
			}})
	}
	dres, runErr := dag.Run(ctx, nodes, dag.Options{
		Jobs: e.opt.Jobs, Cores: coreBudget(e.opt.Jobs), MemoryMB: e.opt.MaxMemoryMB, KeepGoing: e.opt.KeepGoing,
		OnEvent: func(ev dag.Event) {
			// Every canceled node, running or not, is reported here once.
			if ev.Type == "finished" && ev.Status == dag.Status("canceled") {
				kind := ""
				if st, ok := e.plan.Step(ev.ID); ok {
					kind = st.Kind
				}
				e.emit(event.Event{Type: event.Canceled, Step: ev.ID, Kind: kind})
			}
		},
	})
	for _, r := range dag.RootCauses(dres) {
		res.Failed = append(res.Failed, r.Err)
	}
	ids := make([]string, 0, len(dres))
	for id := range dres {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := dres[id]
		if r.Status == dag.Status("skipped") {
			res.Skipped = append(res.Skipped, id)
			msg := "skipped (upstream failed)"
			switch {
			case r.Stopped:
				// Nothing it needs failed: fail-fast stopped the run.
				res.Stopped[id] = r.BlockedBy
				msg = fmt.Sprintf("not run (stopped after %s failed)", r.BlockedBy)
			case r.BlockedBy != "":
				msg = fmt.Sprintf("skipped (upstream %s failed)", r.BlockedBy)
			}
			e.emit(event.Event{Type: event.Skipped, Step: id, Message: msg})
		}
	}
	if err := e.opt.Cache.Memo().Save(); err != nil {
		res.Failed = append(res.Failed, fmt.Errorf("save the digest memo: %w", err))
	}
	// Only steers later runs' scheduling: a failure to save is no failure
	// of this run.
	_ = e.stats().Save()
	e.emit(event.Event{Type: event.Overhead, Phases: e.phases(), MappedBytes: digest.MappedBytes()})
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if len(res.Failed) > 0 {
		return res, res.Failed[0]
	}
	return res, runErr
}

// inputsOf returns the outputs of a step's needs, computing them from the
// cache when this run did not produce them (a single-step run). Unless
// full, an output only the remote cache holds is described by its remote
// record (digests, no folder): enough for a cache key, and nothing is
// downloaded.
func (e *Engine) inputsOf(ctx context.Context, s *plan.Step, full bool) ([]*steps.Output, error) {
	var ins []*steps.Output
	for _, n := range s.Needs {
		e.awaitRebuild(n)
		e.mu.Lock()
		out := e.outputs[n]
		e.mu.Unlock()
		if out == nil {
			ns, _ := e.plan.Step(n)
			if ns.Kind == "publish" {
				continue
			}
			var err error
			out, err = e.cachedAs(ctx, ns, full)
			if err != nil {
				return nil, err
			}
		}
		ins = append(ins, out)
	}
	return ins, nil
}

// cached returns a step's output, or its remote record, from the cache
// without running it.
func (e *Engine) cached(ctx context.Context, s *plan.Step) (*steps.Output, error) {
	return e.cachedAs(ctx, s, false)
}

// cachedAs is cached; full downloads an output only the remote cache holds.
func (e *Engine) cachedAs(ctx context.Context, s *plan.Step, full bool) (*steps.Output, error) {
	if out, ok, err := e.external(s); ok || err != nil {
		return out, err
	}
	key, tools, err := e.key(ctx, s)
	if err != nil {
		return nil, err
	}
	ent, hit, err := e.cacheLookup(s, key)
	if err != nil {
		return nil, err
	}
	var out *steps.Output
	switch {
	case hit:
		out, err = e.fromEntry(s, ent)
	case !full:
		if out, err = e.remoteRecord(ctx, s, key); err == nil && out != nil {
			return out, nil
		}
		if err == nil {
			err = &NeedMissingError{Step: s.ID, Key: key}
		}
	default:
		if out, hit, err = e.remoteCached(ctx, s, key, tools); err == nil && !hit {
			err = &NeedMissingError{Step: s.ID, Key: key}
		}
	}
	if err != nil {
		return nil, err
	}
	out.Tools = tools
	e.record(out)
	return out, nil
}

// external handles steps whose output is a folder outside the cache (a
// local model folder): never copied, digested through the stat memo.
func (e *Engine) external(s *plan.Step) (*steps.Output, bool, error) {
	k, ok := steps.Lookup(s.Kind)
	if !ok {
		return nil, false, nil
	}
	ext, ok := k.(steps.External)
	if !ok {
		return nil, false, nil
	}
	dir, ok, err := ext.ExternalDir(s.Params, e.plan.Recipe.Dir())
	if !ok || err != nil {
		return nil, ok, err
	}
	memo := e.opt.Cache.Memo()
	td, err := memo.Tree(dir)
	if err != nil {
		return nil, true, fmt.Errorf("digest model folder %s: %w", dir, err)
	}
	if err := ext.CheckExternal(s.Params, dir, td.Files); err != nil {
		return nil, true, err
	}
	out := &steps.Output{StepID: s.ID, Kind: s.Kind, Dir: dir, Digest: td.SHA256, Files: td.Files, Result: &steps.Result{}, CacheHit: true}
	e.mu.Lock()
	e.outputs[s.ID] = out
	e.mu.Unlock()
	return out, true, nil
}

// fromEntry is a cached step's output. Its result record is checked
// against the entry's digest on every read: a same-size edit of
// result.json (its perplexity) would otherwise pass the stat checks and
// change what the gate judges. A corrupt record evicts the entry.
func (e *Engine) fromEntry(s *plan.Step, ent *cache.Entry) (*steps.Output, error) {
	res := &steps.Result{}
	b, err := e.opt.Cache.ReadFile(ent, steps.ResultFile, boundedfile.ResultLimit)
	switch {
	case err == nil:
		if res, err = steps.ParseResult(b); err != nil {
			e.opt.Cache.Evict(ent.Key)
			return nil, &cache.CorruptError{Key: ent.Key, StepID: s.ID, Path: steps.ResultFile, Problem: "does not decode: " + err.Error()}
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		e.opt.Cache.Evict(ent.Key)
		return nil, err
	}
	return &steps.Output{StepID: s.ID, Kind: s.Kind, Dir: ent.Dir, Key: ent.Key, Digest: steps.ContentDigest(ent.Tree.Files),
		Files: ent.Tree.Files, Result: res, CacheHit: true, LogPath: filepath.Join(ent.Dir, steps.LogFile)}, nil
}

// key computes a step's cache key: its kind and kind version, canonical
// params, the content digests of its inputs and data files, and the
// identity of every tool it runs.
func (e *Engine) key(ctx context.Context, s *plan.Step) (string, []*tools.Tool, error) {
	k, ok := steps.Lookup(s.Kind)
	if !ok {
		return "", nil, fmt.Errorf("step %s: unknown kind %q", s.ID, s.Kind)
	}
	ins, err := e.inputsOf(ctx, s, false)
	if err != nil {
		return "", nil, err
	}
	var inDigests []string
	for _, in := range ins {
		inDigests = append(inDigests, in.Kind+":"+in.Digest)
	}
	data := map[string]string{}
	for role, ref := range s.Data {
		p, err := e.opt.Data(ref)
		if err != nil {
			return "", nil, fmt.Errorf("step %s: %s data: %w", s.ID, role, err)
		}
		fd, err := e.opt.Cache.Memo().File(p)
		if err != nil {
			return "", nil, fmt.Errorf("step %s: %s data: %w", s.ID, role, err)
		}
		data[role] = fd.SHA256
	}
	var tools []*tools.Tool
	toolIDs := map[string]string{}
	for _, name := range k.Tools(s.Params) {
		t, err := e.opt.Tools.Resolve(ctx, name)
		if err != nil {
			return "", nil, fmt.Errorf("step %s: %w", s.ID, err)
		}
		tools = append(tools, t)
		toolIDs[name] = t.Identity
	}
	fields := map[string]any{
		"kind": s.Kind, "kind_version": k.Version(), "params": s.Params,
		"inputs": inDigests, "data": data, "tools": toolIDs,
	}
	if hb, ok := k.(steps.HostBound); ok {
		// A measurement is only true of the machine that took it.
		fields["host"] = hb.HostIdentity()
	}
	key, err := digest.Key(fields)
	if err != nil {
		return "", nil, fmt.Errorf("step %s: cache key: %w", s.ID, err)
	}
	e.mu.Lock()
	e.keys[s.ID] = key
	e.mu.Unlock()
	return key, tools, nil
}

// coreBudget is the cores the steps share: every core of this machine,
// whatever -j says. -j bounds how many steps run at once, not how many
// threads they may use: with the budget left at -j, `-j 1` on two cores
// granted every step one thread (llama.cpp's -t 1, torch on one core) and
// left the other core idle, and `-j 4` on 64 cores ran four one-thread
// steps. A -j above the core count still oversubscribes, as asked (and
// the steps a dispatcher places on other machines are not bound by this
// one's cores).
func coreBudget(jobs int) int {
	return max(runtime.NumCPU(), jobs)
}

// runStep runs one cacheable step: a cache hit is used as is; otherwise the
// kind fills a fresh folder that is committed to the cache only when the
// kind succeeded.
// runStep runs a step, or finds its output. A step that already failed in
// this engine (while ResolveSource resolved a lock, say) is not tried
// again: the run reports that failure, once.
func (e *Engine) runStep(ctx context.Context, s *plan.Step) error {
	e.mu.Lock()
	prior := e.failures[s.ID]
	e.mu.Unlock()
	if prior != nil {
		return prior
	}
	err := e.runStepOnce(ctx, s)
	if err != nil && ctx.Err() == nil && !IsInterrupted(err) {
		e.mu.Lock()
		e.failures[s.ID] = err
		e.mu.Unlock()
	}
	return err
}

func (e *Engine) runStepOnce(ctx context.Context, s *plan.Step) error {
	doneExternal := e.phase(PhaseSourceDigest)
	_, ok, err := e.external(s)
	doneExternal()
	if ok || err != nil {
		if err == nil {
			e.emit(event.Event{Type: event.Cached, Step: s.ID, Kind: s.Kind, Message: "local folder"})
		} else {
			e.emit(event.Event{Type: event.Failed, Step: s.ID, Kind: s.Kind, Message: err.Error()})
		}
		return err
	}
	// ResolveSource (lock files) may have found or made this output before
	// the run.
	if out := e.output(s.ID); out != nil && out.Key != "" {
		msg := ""
		if !out.CacheHit {
			msg = "fetched before the run, for the lock"
		}
		e.emit(event.Event{Type: event.Cached, Step: s.ID, Kind: s.Kind, Key: out.Key, Message: msg})
		return e.share(ctx, s, out.Key, false)
	}
	kind, _ := steps.Lookup(s.Kind)
	if hr, ok := kind.(steps.HostRequirer); ok {
		if err := hr.RequireHost(s.Params); err != nil {
			err = fmt.Errorf("step %s: %w", s.ID, err)
			e.emit(event.Event{Type: event.Failed, Step: s.ID, Kind: s.Kind, Message: err.Error()})
			return err
		}
	}
	var key string
	var tools []*tools.Tool
	for attempt := 0; ; attempt++ {
		var err error
		done := e.phase(PhaseKeys)
		key, tools, err = e.key(ctx, s)
		done()
		if err != nil {
			e.emit(event.Event{Type: event.Failed, Step: s.ID, Kind: s.Kind, Message: err.Error()})
			return err
		}
		if _, uncached := kind.(steps.Uncached); !uncached {
			done := e.phase(PhaseLookup)
			out, hit, err := e.lookup(s, key, tools)
			done()
			if err != nil || hit {
				if hit {
					e.emit(event.Event{Type: event.Cached, Step: s.ID, Kind: s.Kind, Key: key})
					e.record(out)
					err = e.share(ctx, s, key, false)
				}
				return err
			}
		}
		// The step runs: the cached outputs it reads must be the bytes
		// their steps wrote. One that is not is rebuilt, which may change
		// this step's key.
		done = e.phase(PhaseVerifyInputs)
		rebuilt, err := e.verifyInputs(ctx, s)
		done()
		if err != nil {
			e.emit(event.Event{Type: event.Failed, Step: s.ID, Kind: s.Kind, Message: err.Error()})
			return err
		}
		if !rebuilt || attempt > 0 {
			break
		}
	}
	if _, uncached := kind.(steps.Uncached); uncached {
		return e.execute(ctx, s, kind, key, tools, false)
	}
	release, err := e.opt.Cache.Lock(ctx, key)
	if err != nil {
		return err
	}
	defer release()
	// Another process may have made it while we waited for the lock.
	if out, hit, err := e.lookup(s, key, tools); err != nil || hit {
		if hit {
			e.emit(event.Event{Type: event.Cached, Step: s.ID, Kind: s.Kind, Key: key, Message: "made by another run"})
			e.record(out)
		}
		return err
	}
	if out, hit := e.remoteHit(ctx, s, key, tools); hit {
		e.emit(event.Event{Type: event.Cached, Step: s.ID, Kind: s.Kind, Key: key, Message: "remote cache"})
		e.record(out)
		return nil
	}
	if e.opt.Dispatch != nil {
		return e.dispatch(ctx, s, kind, key, tools)
	}
	if err := e.execute(ctx, s, kind, key, tools, true); err != nil {
		return err
	}
	return e.share(ctx, s, key, true)
}

// execute runs a kind into a fresh folder; with cached set, the folder is
// committed to the cache under key when the kind succeeded, otherwise it
// is thrown away after downstream steps had no chance to see it (uncached
// kinds produce no outputs anyone needs).
func (e *Engine) execute(ctx context.Context, s *plan.Step, kind steps.Kind, key string, tools []*tools.Tool, cached bool) error {
	ins, err := e.inputsOf(ctx, s, true)
	if err != nil {
		return err
	}
	tmp, err := e.opt.Cache.TempDir(key)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			e.opt.Cache.Abort(tmp)
		}
	}()
	// Keyed by step and cache key: two runs sharing the cache may run the
	// same step id with different inputs at once.
	logPath := filepath.Join(e.opt.Cache.Root(), "logs", steps.FileName(s.ID)+"-"+short(key)+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	// A scratch dir GC can tell is in use: a conversion may run for hours.
	scratch, releaseScratch, err := e.opt.Cache.ScratchDir(key)
	if err != nil {
		return err
	}
	defer releaseScratch()

	threads := max(dag.Grant(ctx), 1)
	var peakRSS atomic.Int64
	result := &steps.Result{Threads: threads}
	var log io.Writer = logf
	if e.opt.Verbose != nil {
		log = io.MultiWriter(logf, e.opt.Verbose)
	}
	timeout := time.Duration(s.TimeoutS * float64(time.Second))
	sc := &steps.Context{
		StepID: s.ID, Params: s.Params, Out: tmp, LogPath: logPath, Scratch: scratch, Log: log, Result: result,
		Tool: func(name string) ([]string, error) {
			t, err := e.opt.Tools.Resolve(ctx, name)
			if err != nil {
				return nil, err
			}
			return t.Argv, nil
		},
		// A kind reads its data by role; the key already holds the files'
		// digests.
		Data: func(role string) (string, error) {
			ref, ok := s.Data[role]
			if !ok {
				return "", fmt.Errorf("step %s reads %s data, but the plan gives it none", s.ID, role)
			}
			return e.opt.Data(ref)
		},
		RecipeDir: e.plan.Recipe.Dir(),
		CacheDir:  e.opt.Cache.Root(),
		Threads:   threads,
		Progress: func(label string, done, total int64) {
			if e.opt.OnProgress != nil {
				e.opt.OnProgress(s.ID, label, done, total)
			}
		},
	}
	sc.Exec = func(ctx context.Context, argv []string, env []string) error {
		dir := scratch
		if sc.ExecDir != "" {
			dir = sc.ExecDir
		}
		if env == nil {
			env = os.Environ()
		}
		// Last wins: the grant overrides a thread count inherited from the
		// user's shell, which would oversubscribe the other steps' cores.
		env = append(env[:len(env):len(env)], steps.ThreadEnv(threads, env, kind.Resources(s.Params).OwnWaitPolicy)...)
		defer e.phase(PhaseTools)()
		return proc.Run(ctx, proc.Cmd{Argv: argv, Env: env, LogPath: logPath, Stdout: e.toolOutput(s.ID, argv), Timeout: timeout, Dir: dir, PeakRSS: &peakRSS})
	}
	for _, in := range ins {
		sc.Inputs = append(sc.Inputs, steps.Input{StepID: in.StepID, Kind: in.Kind, Dir: in.Dir, Result: in.Result})
	}

	started := time.Now()
	e.emit(event.Event{Type: event.Started, Step: s.ID, Kind: s.Kind, Key: key, Path: logPath})
	var runErr error
	if kind.Resources(s.Params).Network {
		// Downloads fail for passing reasons; each attempt starts from an
		// empty folder (resumable downloads keep their partial files in
		// their own caches).
		attempt := 0
		runErr = proc.Retry(ctx, 3, 2*time.Second, func(ctx context.Context) error {
			if attempt++; attempt > 1 {
				fmt.Fprintf(logf, "retrying (attempt %d)\n", attempt)
				if err := emptyDir(tmp); err != nil {
					return proc.Permanent(err)
				}
				sc.Result = &steps.Result{Threads: threads}
				result = sc.Result
			}
			return kind.Run(ctx, sc)
		})
	} else {
		runErr = kind.Run(ctx, sc)
	}
	if runErr == nil {
		e.stats().Observe(statsKey(e.plan, s.ID), runstats.Step{Kind: s.Kind, DurationNS: int64(time.Since(started)),
			PeakRSS: peakRSS.Load(), ModelBytes: e.modelBytes(ctx, false)})
		result.PeakRSS = peakRSS.Load()
		if probe := result.Metrics[shared.MetricBandwidthProbeSeconds]; probe > 0 {
			e.addPhase(PhaseBandwidthProbe, time.Duration(probe*float64(time.Second)))
		}
		for _, t := range tools {
			result.SetVersion(t.Name, t.Version)
			if t.StandIn {
				result.StandIns = append(result.StandIns, t.Name)
			}
		}
		runErr = steps.WriteResult(tmp, result)
	}
	if runErr != nil {
		if ctx.Err() != nil {
			return ctx.Err() // the scheduler reports it canceled
		}
		e.emit(event.Event{Type: event.Failed, Step: s.ID, Kind: s.Kind, Seconds: time.Since(started).Seconds(), Message: runErr.Error(), Path: logPath})
		return &StepError{Step: s.ID, LogPath: logPath, Err: runErr}
	}
	logf.Close()
	if !cached {
		out := &steps.Output{StepID: s.ID, Kind: s.Kind, Dir: tmp, Key: key, Result: result, Started: started,
			Finished: time.Now(), LogPath: logPath, Tools: tools}
		e.record(out)
		e.emit(event.Event{Type: event.Finished, Step: s.ID, Kind: s.Kind, Seconds: out.Finished.Sub(started).Seconds()})
		return nil
	}
	if _, _, err := atomicfile.Copy(filepath.Join(tmp, steps.LogFile), logPath, 0o644); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return &StepError{Step: s.ID, LogPath: logPath, Err: fmt.Errorf("its tool wrote a file named %s into the step's output, "+
				"a name edgepipe keeps for the step's log: the tool must not copy it from its input's folder", steps.LogFile)}
		}
		return fmt.Errorf("step %s: keep its log: %w", s.ID, err)
	}
	doneCommit := e.phase(PhaseCommit)
	ent, err := e.opt.Cache.Commit(key, tmp, cache.Entry{Kind: s.Kind, StepID: s.ID,
		Duration: time.Since(started), Tools: toolVersions(tools)})
	if err != nil {
		return fmt.Errorf("step %s: store its output in the cache: %w", s.ID, err)
	}
	committed = true
	out, err := e.fromEntry(s, ent)
	doneCommit()
	if err != nil {
		return err
	}
	out.CacheHit = false
	out.Started, out.Finished = started, time.Now()
	out.Tools = tools
	e.record(out)
	e.emit(event.Event{Type: event.Finished, Step: s.ID, Kind: s.Kind, Key: key, Seconds: out.Finished.Sub(started).Seconds()})
	return nil
}

// lookup finds key in the cache; a hit carries the tools its key was made
// with (resolved for the key just now), so nobody resolves them again.
func (e *Engine) lookup(s *plan.Step, key string, tools []*tools.Tool) (*steps.Output, bool, error) {
	if e.opt.Force {
		return nil, false, nil
	}
	ent, hit, err := e.cacheLookup(s, key)
	if err != nil || !hit {
		return nil, false, err
	}
	out, err := e.fromEntry(s, ent)
	var corrupt *cache.CorruptError
	if errors.As(err, &corrupt) {
		// Evicted: the step runs again, and the run says why.
		e.emit(event.Event{Type: event.Log, Step: s.ID, Kind: s.Kind, Key: key, Message: corrupt.Error()})
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out.Tools = tools
	return out, true, nil
}

// cacheLookup is the cache's Lookup for step s, which reports an entry
// damaged in place (and evicted) the way the other checks do: a note that
// says what was wrong, and a miss, so the step runs again.
func (e *Engine) cacheLookup(s *plan.Step, key string) (*cache.Entry, bool, error) {
	ent, hit, err := e.opt.Cache.Lookup(key)
	var corrupt *cache.CorruptError
	if errors.As(err, &corrupt) {
		e.emit(event.Event{Type: event.Log, Step: s.ID, Kind: s.Kind, Key: key, Message: corrupt.Error()})
		return nil, false, nil
	}
	return ent, hit, err
}

func (e *Engine) record(out *steps.Output) {
	e.mu.Lock()
	e.outputs[out.StepID] = out
	e.mu.Unlock()
}

func toolVersions(tools []*tools.Tool) map[string]string {
	m := map[string]string{}
	for _, t := range tools {
		m[t.Name] = t.Version
	}
	return m
}

// CacheStatus reports, without running anything, whether each step's
// output is in the cache: "hit", "miss", or "miss" for every step below a
// miss (its key depends on outputs that do not exist yet).
func (e *Engine) CacheStatus(ctx context.Context) map[string]string {
	st := map[string]string{}
	for _, s := range e.plan.Steps {
		if s.Kind == "publish" {
			st[s.ID] = e.publishStatus(ctx, s)
			continue
		}
		if _, err := e.cached(ctx, s); err != nil {
			st[s.ID] = "miss"
		} else {
			st[s.ID] = "hit"
		}
	}
	return st
}

// Key returns the cache key computed for a step in this run, if any.
func (e *Engine) Key(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.keys[id]
}

func short(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}

func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// IsInterrupted reports whether err means the run was interrupted.
func IsInterrupted(err error) bool {
	return errors.Is(err, context.Canceled)
}

// toolOutput is where a tool's output goes besides its log: --verbose's
// writer, and a scanner for the progress it prints.
func (e *Engine) toolOutput(step string, argv []string) io.Writer {
	if e.opt.OnToolProgress == nil {
		if e.opt.Verbose == nil {
			return nil
		}
		return e.opt.Verbose
	}
	tool := toolName(argv)
	scan := &toolprogress.Scanner{Report: func(done, total int64) { e.opt.OnToolProgress(step, tool, done, total) }}
	if e.opt.Verbose == nil {
		return scan
	}
	// The scanner first: it never fails, so a closed terminal cannot
	// stop it.
	return io.MultiWriter(scan, e.opt.Verbose)
}

// toolName is what a progress line calls the tool: the program, or the
// script a Python interpreter runs.
func toolName(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	name := filepath.Base(argv[0])
	if strings.HasPrefix(name, "python") {
		for _, a := range argv[1:] {
			if strings.HasSuffix(a, ".py") {
				return filepath.Base(a)
			}
		}
	}
	return name
}

// SetOnToolProgress sets the callback for the progress tools print.
func (e *Engine) SetOnToolProgress(f func(step, tool string, done, total int64)) {
	e.opt.OnToolProgress = f
}

// SetOnEvent sets the event callback (progress output, --json).
func (e *Engine) SetOnEvent(f func(event.Event)) { e.opt.OnEvent = f }

// SetOnProgress sets the byte-progress callback: download bars, and bars
// for hashing big files (a multi-GB source is read once before its first
// run, which otherwise looks like a hang).
func (e *Engine) SetOnProgress(f func(step, label string, done, total int64)) {
	e.opt.OnProgress = f
	memo := e.opt.Cache.Memo()
	if f == nil {
		memo.SetProgress(nil)
		return
	}
	memo.SetProgress(func(path string, done, total int64) {
		f("hashing", filepath.Base(path), done, total)
	})
}

// verifyInputs checks, once per run and key, that every cached output a
// step is about to read is byte for byte what its step wrote: a full
// rehash, paid only by steps that run (they read those bytes anyway), so a
// no-op rerun still reads none. A corrupt output is evicted and its step
// rebuilt; rebuilt reports whether any was.
func (e *Engine) verifyInputs(ctx context.Context, s *plan.Step) (rebuilt bool, err error) {
	for _, n := range s.Needs {
		e.awaitRebuild(n)
		out := e.output(n)
		if out == nil || out.Key == "" || !out.CacheHit || e.isVerified(out.Key) {
			continue // a local folder, a publish, or made (and hashed) by this run
		}
		ent, hit, err := e.opt.Cache.Lookup(out.Key)
		var corrupt *cache.CorruptError
		if err != nil && !errors.As(err, &corrupt) {
			return rebuilt, err
		}
		if hit {
			err = e.opt.Cache.VerifyObject(ent)
		}
		if hit && err == nil {
			e.markVerified(out.Key)
			continue
		}
		msg := fmt.Sprintf("the cached output of %s is gone", n)
		if err != nil {
			msg = err.Error()
		}
		e.emit(event.Event{Type: event.Log, Step: n, Kind: out.Kind, Key: out.Key, Message: msg})
		e.opt.Cache.Evict(out.Key)
		if err := e.rebuild(ctx, n); err != nil {
			return rebuilt, err
		}
		rebuilt = true
	}
	return rebuilt, nil
}

// rebuild runs a step again whose cached output was evicted, once even
// when several steps that read it find it corrupt at the same time.
func (e *Engine) rebuild(ctx context.Context, id string) error {
	e.mu.Lock()
	m, ok := e.rebuilding[id]
	if !ok {
		m = &sync.Mutex{}
		e.rebuilding[id] = m
	}
	e.mu.Unlock()
	m.Lock()
	defer m.Unlock()
	if out := e.output(id); out != nil && (!out.CacheHit || e.isVerified(out.Key)) {
		return nil // rebuilt by another reader meanwhile
	}
	st, _ := e.plan.Step(id)
	e.mu.Lock()
	delete(e.outputs, id)
	e.mu.Unlock()
	return e.runStep(ctx, st)
}

// awaitRebuild returns once no reader is rebuilding step id: while one is,
// its output is neither recorded nor cached, and a reader that looked then
// would take the step for one that never ran.
func (e *Engine) awaitRebuild(id string) {
	e.mu.Lock()
	m, ok := e.rebuilding[id]
	e.mu.Unlock()
	if ok {
		m.Lock()
		defer m.Unlock() // a barrier: wait for the rebuilding reader, hold nothing
	}
}

func (e *Engine) isVerified(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.verified[key]
}

func (e *Engine) markVerified(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.verified[key] = true
}
