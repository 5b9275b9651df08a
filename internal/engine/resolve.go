package engine

import (
	"context"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"sort"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/tools"

	"github.com/edgepipe/edgepipe/steps"
)

// What a plan resolves to before any conversion runs: the source (fetched,
// or found in the cache), the tools and the data files. Lock files are
// made of it, and it costs no hashing that the cache and the stat memo
// already did.

// ResolveSource returns the source step's output: this run's, the cached
// one, or a fresh fetch. With refetch, a source whose revision can move (a
// branch of a Hugging Face or git repository) is fetched again so that it
// resolves to where the branch is now; the cache entry is replaced. The
// run that follows reuses the output instead of fetching again.
func (e *Engine) ResolveSource(ctx context.Context, refetch bool) (*steps.Output, error) {
	s, ok := e.plan.Step(plan.SourceStepID)
	if !ok {
		return nil, fmt.Errorf("the plan has no %s step", plan.SourceStepID)
	}
	if out := e.output(s.ID); out != nil && !refetch {
		return out, nil
	}
	// A local folder or a cache hit is taken quietly: the run reports it.
	if out, ok, err := e.external(s); ok || err != nil {
		return out, err
	}
	if !refetch || !shared.MovingRevision(e.plan.Source()) {
		key, tools, err := e.key(ctx, s)
		if err != nil {
			return nil, err
		}
		if out, hit, err := e.lookup(s, key, tools); err != nil || hit {
			if hit {
				e.record(out)
			}
			return out, err
		}
		// Another machine may have fetched or made it: the remote cache
		// answers before anything is fetched here.
		if out, hit, err := e.remoteCached(ctx, s, key, tools); err != nil || hit {
			if hit {
				e.record(out)
			}
			return out, err
		}
	}
	if refetch && shared.MovingRevision(e.plan.Source()) {
		kind, _ := steps.Lookup(s.Kind)
		key, tools, err := e.key(ctx, s)
		if err != nil {
			return nil, err
		}
		release, err := e.opt.Cache.Lock(ctx, key)
		if err != nil {
			return nil, err
		}
		defer release()
		if err := e.execute(ctx, s, kind, key, tools, true); err != nil {
			return nil, err
		}
	} else if err := e.runStep(ctx, s); err != nil {
		return nil, err
	}
	out := e.output(s.ID)
	if out == nil {
		return nil, fmt.Errorf("the %s step left no output", plan.SourceStepID)
	}
	return out, nil
}

// ResolveTools resolves every tool the plan's steps run (once each),
// sorted by name.
func (e *Engine) ResolveTools(ctx context.Context) ([]*tools.Tool, error) {
	seen := map[string]bool{}
	var out []*tools.Tool
	// A step this host refuses (no NVIDIA GPU), or one after it, runs no
	// tool here; its tools are not this platform's to lock.
	refused := e.plan.Refused()
	for _, s := range e.plan.Steps {
		k, ok := steps.Lookup(s.Kind)
		if !ok || refused[s.ID] {
			continue // publish, or not run here
		}
		for _, name := range k.Tools(s.Params) {
			if seen[name] {
				continue
			}
			seen[name] = true
			t, err := e.opt.Tools.Resolve(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("step %s: %w", s.ID, err)
			}
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ResolveData digests every data file the plan's steps read, keyed by the
// reference as the recipe writes it (builtin:eval, eval.txt). The stat
// memo answers for files it has seen unchanged.
func (e *Engine) ResolveData() (map[string]string, error) {
	out := map[string]string{}
	for _, s := range e.plan.Steps {
		for role, ref := range s.Data {
			if _, done := out[ref]; done {
				continue
			}
			p, err := e.opt.Data(ref)
			if err != nil {
				return nil, fmt.Errorf("step %s: %s data: %w", s.ID, role, err)
			}
			fd, err := e.opt.Cache.Memo().File(p)
			if err != nil {
				return nil, fmt.Errorf("step %s: %s data: %w", s.ID, role, err)
			}
			out[ref] = fd.SHA256
		}
	}
	return out, nil
}
