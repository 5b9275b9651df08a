package publish

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/remote"
)

// PushError is a target whose local folder is published, complete and
// verified, but whose push to a remote (publish: in the recipe) failed.
type PushError struct {
	Target string
	Dir    string
	// Dest is where the push went (no credentials: the recipe holds none).
	Dest string
	Err  error
}

func (e *PushError) Error() string {
	return fmt.Sprintf("target %s is published at %s, but pushing it to %s failed: %v; the local folder is complete and verified: fix the cause and run again (a push sends only what the remote lacks)",
		e.Target, e.Dir, e.Dest, e.Err)
}

func (e *PushError) Unwrap() error { return e.Err }

// IsPushFailure reports whether err is (or wraps) a failed push.
func IsPushFailure(err error) bool {
	var pe *PushError
	return errors.As(err, &pe)
}

// pushRemotes pushes a published folder to each remote its target lists, in
// recipe order, after the local publish: a remote never holds what the
// gates did not pass, and a failed push never touches the local folder. It
// runs on every run, cached or not, so a push that failed before is retried;
// pushes are content-addressed, so one that is already there sends nothing.
func (p *Publisher) pushRemotes(ctx context.Context, req *Request, final string) error {
	if p.NoPush {
		return nil
	}
	name := req.Params.Target
	var errs []error
	for _, pt := range req.Remotes {
		started := time.Now()
		d, err := remote.Parse(pt.URL, pt.Insecure)
		if err != nil {
			errs = append(errs, &PushError{Target: name, Dir: final, Dest: pt.URL, Err: err})
			continue
		}
		where := d.Where(name)
		res, err := d.Push(ctx, final, name)
		if err != nil {
			p.emit(event.Event{Type: event.PushFailed, Step: req.StepID, Target: name, Path: where, Message: err.Error()})
			errs = append(errs, &PushError{Target: name, Dir: final, Dest: where, Err: err})
			continue
		}
		p.emit(event.Event{Type: event.Pushed, Step: req.StepID, Target: name, Path: res.Where, Seconds: time.Since(started).Seconds(),
			Message: fmt.Sprintf("%d uploaded", res.Uploaded)})
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}
