package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/remotecache"
	"github.com/edgepipe/edgepipe/internal/tools"
	"github.com/edgepipe/edgepipe/steps"
)

// NeedMissingError is a step whose output a single-step run needs and
// neither the local nor the remote cache holds: run it first.
type NeedMissingError struct{ Step, Key string }

func (e *NeedMissingError) Error() string {
	return fmt.Sprintf("step %s has not run yet (no cache entry %s here or in a remote cache): run its needs first", e.Step, short(e.Key))
}

// RemoteCache shares step outputs between machines (package remotecache).
type RemoteCache interface {
	// Fetch downloads key's output into c and returns its local entry;
	// (nil, nil) is a miss, (nil, err) a miss to warn about. The record
	// must be step's. The caller holds key's local lock.
	Fetch(ctx context.Context, c *cache.Cache, key string, step remotecache.Step) (*cache.Entry, error)
	// Files reads key's remote record, which must be step's: its output's
	// files, or nil for a miss. Nothing is downloaded but the record.
	Files(ctx context.Context, key string, step remotecache.Step) ([]digest.FileDigest, error)
	// Upload shares a local entry (objects first, the record last);
	// verify rehashes its files first.
	Upload(ctx context.Context, ent *cache.Entry, verify bool) error
}

// remoteHit looks key up in the remote cache after a local miss; the
// caller holds key's lock. A hit is committed to the local cache and
// used like a local hit; anything wrong with it is a warning and a miss.
func (e *Engine) remoteHit(ctx context.Context, s *plan.Step, key string, tl []*tools.Tool) (*steps.Output, bool) {
	if e.opt.Force {
		return nil, false
	}
	return e.fetchRemote(ctx, s, key, tl)
}

// fetchRemote is remoteHit even under --force: the output of a step that
// just ran elsewhere (Dispatch).
func (e *Engine) fetchRemote(ctx context.Context, s *plan.Step, key string, tl []*tools.Tool) (*steps.Output, bool) {
	if e.opt.Remote == nil {
		return nil, false
	}
	ent, err := e.opt.Remote.Fetch(ctx, e.opt.Cache, key, remotecache.Step{ID: s.ID, Kind: s.Kind})
	if err != nil {
		e.emit(event.Event{Type: event.Log, Step: s.ID, Kind: s.Kind, Key: key, Message: err.Error()})
		return nil, false
	}
	if ent == nil {
		return nil, false
	}
	out, err := e.fromEntry(s, ent)
	if err != nil {
		e.emit(event.Event{Type: event.Log, Step: s.ID, Kind: s.Kind, Key: key, Message: err.Error()})
		return nil, false
	}
	out.Tools = tl
	// Hashed while it downloaded: readers need not hash it again.
	e.markVerified(key)
	return out, true
}

// share uploads key's local entry to the remote cache: after the step
// ran (fresh), or after a local hit the remote may lack (rehashed first,
// so a damaged local copy is never shared). A failed upload is a warning,
// or the step's failure under RemoteStrict (a worker whose output the
// orchestrator will look for).
func (e *Engine) share(ctx context.Context, s *plan.Step, key string, fresh bool) error {
	if e.opt.Remote == nil {
		return nil
	}
	ent, hit, err := e.opt.Cache.Lookup(key)
	if err == nil && hit {
		err = e.opt.Remote.Upload(ctx, ent, !fresh)
	}
	var quiet interface{ Quiet() bool }
	if err != nil && !e.opt.RemoteStrict && errors.As(err, &quiet) && quiet.Quiet() {
		return nil // said once already (an unreachable remote cache)
	}
	if err != nil {
		if e.opt.RemoteStrict {
			e.emit(event.Event{Type: event.Failed, Step: s.ID, Kind: s.Kind, Key: key, Message: err.Error()})
			return &StepError{Step: s.ID, Err: err}
		}
		e.emit(event.Event{Type: event.Log, Step: s.ID, Kind: s.Kind, Key: key, Message: "not shared: " + err.Error()})
	}
	return nil
}

// remoteCached is cached's fallback for a step whose output this machine
// lacks (a single step run on a worker): fetch it from the remote cache,
// holding its key's lock.
func (e *Engine) remoteCached(ctx context.Context, s *plan.Step, key string, tl []*tools.Tool) (*steps.Output, bool, error) {
	if e.opt.Remote == nil {
		return nil, false, nil
	}
	release, err := e.opt.Cache.Lock(ctx, key)
	if err != nil {
		return nil, false, err
	}
	defer release()
	if ent, hit, err := e.cacheLookup(s, key); err != nil || hit {
		if err != nil {
			return nil, false, err
		}
		out, err := e.fromEntry(s, ent)
		return out, err == nil, err
	}
	out, ok := e.remoteHit(ctx, s, key, tl)
	if ok {
		e.emit(event.Event{Type: event.Log, Step: s.ID, Kind: s.Kind, Key: key, Message: "fetched from the remote cache"})
	}
	return out, ok, nil
}

// remoteRecord describes an output only the remote cache holds by its
// record: the files' digests, which is all a cache key needs of an input;
// nil when the remote has none. It is not recorded as the step's output:
// a step that reads the files fetches them (inputsOf with full).
func (e *Engine) remoteRecord(ctx context.Context, s *plan.Step, key string) (*steps.Output, error) {
	if e.opt.Remote == nil || e.opt.Force {
		return nil, nil
	}
	files, err := e.opt.Remote.Files(ctx, key, remotecache.Step{ID: s.ID, Kind: s.Kind})
	if err != nil {
		e.emit(event.Event{Type: event.Log, Step: s.ID, Kind: s.Kind, Key: key, Message: err.Error()})
		return nil, nil
	}
	if files == nil {
		return nil, nil
	}
	return &steps.Output{StepID: s.ID, Kind: s.Kind, Key: key, Digest: steps.ContentDigest(files), Files: files,
		Result: &steps.Result{}, CacheHit: true}, nil
}
