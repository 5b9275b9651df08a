package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/publish"

	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/steps"
)

// publishKey identifies what a publish would write: its params, its
// inputs' content and the edgepipe version that writes the manifest.
func (e *Engine) publishKey(s *plan.Step, ins []*steps.Output) (string, error) {
	var inDigests []string
	for _, in := range ins {
		inDigests = append(inDigests, in.StepID+"="+in.Digest)
	}
	return digest.Key(map[string]any{"params": s.Params, "inputs": inDigests, "version": e.opt.Version})
}

// publishStatus is "hit" when the target's folder already holds exactly
// what a run would publish.
func (e *Engine) publishStatus(ctx context.Context, s *plan.Step) string {
	// An input only the remote cache holds is not downloaded to answer:
	// publishing will fetch it, so the publish is still to do.
	ins, err := e.inputsOf(ctx, s, false)
	for _, in := range ins {
		if in.Dir == "" {
			return "miss"
		}
	}
	if err != nil {
		return "miss"
	}
	req, err := e.publishRequest(ctx, s)
	if err != nil || !e.publisher().Current(req) {
		return "miss"
	}
	return "hit"
}

// publish hands a target's typed records to the publisher, which gates it
// and, when its checks pass, writes its folder.
func (e *Engine) publish(ctx context.Context, s *plan.Step) (*publish.Result, error) {
	req, err := e.publishRequest(ctx, s)
	if err != nil {
		return nil, err
	}
	res, err := e.publisher().Publish(ctx, req)
	var corrupt *cache.CorruptError
	if errors.As(err, &corrupt) && req.Model.Key != "" {
		// The model's cached bytes are not what its step wrote: evict,
		// rebuild it and the checks that judged it, publish once more.
		e.emit(event.Event{Type: event.Log, Step: s.ID, Target: s.Target, Message: corrupt.Error()})
		e.opt.Cache.Evict(req.Model.Key)
		if err := e.rebuild(ctx, req.Model.StepID); err != nil {
			return nil, err
		}
		for _, c := range req.Checks {
			if err := e.rebuild(ctx, c.StepID); err != nil {
				return nil, err
			}
		}
		if req, err = e.publishRequest(ctx, s); err != nil {
			return nil, err
		}
		res, err = e.publisher().Publish(ctx, req)
	}
	if res != nil && res.Dir != "" {
		e.record(&steps.Output{StepID: s.ID, Kind: "publish", Dir: res.Dir, Result: publishedResult(req.Model), CacheHit: res.Cached})
	}
	return res, err
}

func (e *Engine) publisher() *publish.Publisher {
	return &publish.Publisher{OutDir: e.opt.OutDir, Version: e.opt.Version, Force: e.opt.Force, NoPush: e.opt.NoPush,
		Signer: e.opt.Signer, Run: e.opt.Run, Emit: e.emit}
}

// publishRequest gathers what a target's publish judges and records: its
// model, its checks, every step upstream with the tools it ran, the
// plan-time fit and the data it read.
func (e *Engine) publishRequest(ctx context.Context, s *plan.Step) (*publish.Request, error) {
	ins, err := e.inputsOf(ctx, s, true)
	if err != nil {
		return nil, err
	}
	key, err := e.publishKey(s, ins)
	if err != nil {
		return nil, err
	}
	params, ok := s.Params.(*publish.Params)
	if !ok {
		return nil, fmt.Errorf("step %s: publish parameters are %T", s.ID, s.Params)
	}
	r := e.plan.Recipe
	req := &publish.Request{StepID: s.ID, Params: params, RecipePath: r.Path, SourceURI: r.Model.Source,
		Model: ins[0], Checks: ins[1:], Key: key, Source: e.output(plan.SourceStepID), Deps: e.provenanceDeps(ctx, s)}
	if t := r.TargetNamed(params.Target); t != nil {
		for _, to := range t.Publish {
			req.Remotes = append(req.Remotes, publish.Remote{URL: to.URL, Insecure: to.Insecure})
		}
	}
	if fd, err := e.opt.Cache.Memo().File(r.Path); err == nil {
		req.RecipeSHA256 = fd.SHA256
	}
	for _, st := range e.upstream(s) {
		out := e.output(st.ID)
		if out == nil {
			continue
		}
		if len(out.Tools) == 0 {
			withTools := *out
			withTools.Tools = e.toolsOf(ctx, st)
			out = &withTools
		}
		req.Upstream = append(req.Upstream, out)
	}
	return req, nil
}

// publishedResult names the published model file so user steps can refer
// to ${target.outputs.model}.
func publishedResult(model *steps.Output) *steps.Result {
	r := &steps.Result{}
	if model.Result != nil {
		for role, rel := range model.Result.Files {
			r.SetFile(role, rel)
		}
	}
	return r
}

func (e *Engine) output(id string) *steps.Output {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.outputs[id]
}

// upstream lists every step s depends on, in plan order.
func (e *Engine) upstream(s *plan.Step) []*plan.Step {
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
	var out []*plan.Step
	for _, st := range e.plan.Steps {
		if seen[st.ID] && st.Kind != "publish" {
			out = append(out, st)
		}
	}
	return out
}
