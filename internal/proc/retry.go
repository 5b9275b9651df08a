package proc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// Permanent marks an error that retrying cannot fix (a 404, a bad
// checksum), so Retry returns it at once. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// Retry calls fn up to attempts times, pausing base, 2*base, 4*base, ...
// (capped at two minutes, half of each pause random so that parallel
// retries spread out) between failures. It stops early when ctx is done or
// fn returns an error marked with Permanent or a *NotFoundError, returning
// that error unchanged. After the last attempt it returns the last error,
// saying how many attempts were made.
func Retry(ctx context.Context, attempts int, base time.Duration, fn func(ctx context.Context) error) error {
	attempts = max(attempts, 1)
	for i := 0; ; i++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		var perm *permanentError
		var missing *NotFoundError
		if errors.As(err, &perm) || errors.As(err, &missing) || ctx.Err() != nil {
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
