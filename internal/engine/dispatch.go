package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/runstats"
	"github.com/edgepipe/edgepipe/internal/tools"
	"github.com/edgepipe/edgepipe/steps"
)

// Dispatcher runs one step elsewhere (a Ray worker running `edgepipe step
// run`): it returns once the step's output is in the remote cache.
type Dispatcher interface {
	// Dispatch returns the key the worker stored the output under (""
	// means Key) and where it ran, for the step's events.
	Dispatch(ctx context.Context, d Dispatch) (key, where string, err error)
}

// Dispatch is a step to run elsewhere, with its weight for placement.
type Dispatch struct {
	Step      *plan.Step
	Key       string // the key this machine computed
	Resources steps.Resources
	MemoryMB  int64
	Force     bool // --force: the worker reruns the step even when cached
}

// dispatch hands a step that missed both caches to the Dispatcher, then
// takes its output from the remote cache like a remote hit: downloaded,
// digest-checked and committed locally. The DAG, the gates and the
// publishing stay here.
func (e *Engine) dispatch(ctx context.Context, s *plan.Step, kind steps.Kind, key string, tl []*tools.Tool) error {
	r := kind.Resources(s.Params)
	mem, _ := e.predictMemory(s.Kind, r, e.model(ctx, false))
	started := time.Now()
	e.emit(event.Event{Type: event.Started, Step: s.ID, Kind: s.Kind, Key: key, Message: "dispatched"})
	wkey, where, err := e.opt.Dispatch.Dispatch(ctx, Dispatch{Step: s, Key: key, Resources: r, MemoryMB: mem, Force: e.opt.Force})
	if err == nil && wkey == "" {
		wkey = key
	}
	var out *steps.Output
	if err == nil {
		var hit bool
		// A host-bound step (bench) is keyed by the worker's host: its
		// key is the worker's, not this machine's.
		if out, hit = e.fetchRemote(ctx, s, wkey, tl); !hit {
			err = fmt.Errorf("it ran on %s, but its output (key %s) is not in the remote cache", where, short(wkey))
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.emit(event.Event{Type: event.Failed, Step: s.ID, Kind: s.Kind, Seconds: time.Since(started).Seconds(), Message: err.Error()})
		return &StepError{Step: s.ID, Err: err}
	}
	out.CacheHit = false
	out.Started, out.Finished = started, time.Now()
	var peak int64
	if out.Result != nil {
		peak = out.Result.PeakRSS
	}
	e.stats().Observe(statsKey(e.plan, s.ID), runstats.Step{Kind: s.Kind, DurationNS: int64(time.Since(started)),
		PeakRSS: peak, ModelBytes: e.modelBytes(ctx, false)})
	e.record(out)
	e.emit(event.Event{Type: event.Finished, Step: s.ID, Kind: s.Kind, Key: wkey, Seconds: time.Since(started).Seconds(), Message: "on " + where})
	return nil
}

// SetDispatcher sends the steps that miss both caches to d, jobs at once
// (0: the -j budget); placement by memory is d's, so the local memory
// budget no longer holds them back. Publishing stays here.
func (e *Engine) SetDispatcher(d Dispatcher, jobs int) {
	e.opt.Dispatch = d
	if jobs > 0 {
		e.opt.Jobs = jobs
	}
	e.opt.MaxMemoryMB = 1 << 40
}
