package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"
)

// maxBackoff caps the pause between attempts.
const maxBackoff = 2 * time.Minute

// Test seams: the pause and the jitter source.
var (
	sleep  = sleepCtx
	jitter = rand.Float64
)

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks an error that retrying cannot fix even if it looks like
// a network failure, so Retry returns it at once. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// Transient marks an error that a later attempt may not meet (a dropped
// connection, a 503, a 429), so Retry tries again. Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err: err}
}

type transientError struct{ err error }

func (e *transientError) Error() string   { return e.err.Error() }
func (e *transientError) Unwrap() error   { return e.err }
func (e *transientError) Transient() bool { return true }

// IsTransient reports whether retrying err may succeed: it is marked (any
// error in the chain with a Transient() bool method says so), or it is a
// network failure (a refused, reset or timed-out connection, a DNS error, a
// body cut short). Anything else (a 404, a policy refusal, a bad checksum,
// a validation error) would fail again the same way. A context's own
// cancellation or deadline is never transient.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var perm *permanentError
	if errors.As(err, &perm) {
		return false
	}
	var t interface{ Transient() bool }
	if errors.As(err, &t) {
		return t.Transient()
	}
	for _, e := range []error{io.ErrUnexpectedEOF, syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.ECONNABORTED,
		syscall.EPIPE, syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// Retry calls fn up to attempts times while it fails with a transient error
// (IsTransient), pausing base, 2*base, 4*base, ... (capped at two minutes,
// half of each pause random so that parallel retries spread out) between
// failures. Any other error, or ctx done, ends it at once with that error
// unchanged. After the last attempt it returns the last error, saying how
// many attempts were made.
func Retry(ctx context.Context, attempts int, base time.Duration, fn func(ctx context.Context) error) error {
	attempts = max(attempts, 1)
	for i := 0; ; i++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if !IsTransient(err) || ctx.Err() != nil {
			return err
		}
		if i == attempts-1 {
			if attempts == 1 {
				return err
			}
			return fmt.Errorf("gave up after %d attempts: %w", attempts, err)
		}
		if serr := sleep(ctx, backoff(base, i)); serr != nil {
			return fmt.Errorf("%w (retry stopped: %w)", err, serr)
		}
	}
}

// backoff is the pause after failed attempt number attempt (from 0): the
// exponential step d, of which the first half is fixed and the second random.
func backoff(base time.Duration, attempt int) time.Duration {
	d := base
	for range attempt {
		if d >= maxBackoff/2 {
			d = maxBackoff
			break
		}
		d *= 2
	}
	d = max(d, base) // a base above the cap is honoured as given
	return d/2 + time.Duration(jitter()*float64(d-d/2))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
