package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeClock replaces the pause and jitter seams for one test. Tests using
// it must not run in parallel.
func fakeClock(t *testing.T, jit float64) *[]time.Duration {
	t.Helper()
	var slept []time.Duration
	oldSleep, oldJitter := sleep, jitter
	sleep = func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		return ctx.Err()
	}
	jitter = func() float64 { return jit }
	t.Cleanup(func() { sleep, jitter = oldSleep, oldJitter })
	return &slept
}

var errFlaky = Transient(errors.New("connection reset by peer"))

func TestRetrySucceedsAfterFailures(t *testing.T) {
	slept := fakeClock(t, 0)
	calls := 0
	err := Retry(context.Background(), 5, time.Second, func(context.Context) error {
		if calls++; calls < 4 {
			return errFlaky
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("err=%v calls=%d", err, calls)
	}
	// With zero jitter each pause is half its exponential step.
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}
	if len(*slept) != len(want) {
		t.Fatalf("slept %v, want %v", *slept, want)
	}
	for i := range want {
		if (*slept)[i] != want[i] {
			t.Errorf("pause %d = %v, want %v", i, (*slept)[i], want[i])
		}
	}
}

func TestRetryJitterBounds(t *testing.T) {
	for _, tc := range []struct {
		jit     float64
		attempt int
		want    time.Duration
	}{
		{0, 0, 50 * time.Millisecond},
		{0.999999999, 0, 100 * time.Millisecond},
		{0.5, 3, 600 * time.Millisecond},
		{1, 30, maxBackoff}, // capped, no overflow
	} {
		jitter = func() float64 { return tc.jit }
		got := backoff(100*time.Millisecond, tc.attempt)
		if d := got - tc.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("backoff(attempt %d, jitter %v) = %v, want %v", tc.attempt, tc.jit, got, tc.want)
		}
	}
	fakeClock(t, 0) // restores jitter
}

func TestRetryGivesUp(t *testing.T) {
	slept := fakeClock(t, 0.5)
	calls := 0
	err := Retry(context.Background(), 3, time.Millisecond, func(context.Context) error {
		calls++
		return errFlaky
	})
	if calls != 3 || len(*slept) != 2 || !errors.Is(err, errFlaky) || !strings.HasPrefix(err.Error(), "gave up after 3 attempts: ") {
		t.Errorf("calls=%d slept=%v err=%v", calls, *slept, err)
	}
}

func TestRetryPermanent(t *testing.T) {
	fakeClock(t, 0)
	notFound := errors.New("404 not found")
	for _, stop := range []error{Permanent(notFound), &NotFoundError{Tool: "hf", Err: notFound}} {
		calls := 0
		err := Retry(context.Background(), 5, time.Millisecond, func(context.Context) error {
			calls++
			return stop
		})
		if calls != 1 || !errors.Is(err, notFound) {
			t.Errorf("calls=%d err=%v", calls, err)
		}
	}
	if Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
	if Permanent(notFound).Error() != notFound.Error() {
		t.Error("Permanent changed the message")
	}
}

// Only what a retry can fix is retried: a 404, a policy refusal or a
// validation error fails on the first attempt.
func TestRetryOnlyTransient(t *testing.T) {
	fakeClock(t, 0)
	for _, tc := range []struct {
		name string
		err  error
		want int // calls
	}{
		{"plain error", errors.New("HTTP 404: not found"), 1},
		{"marked transient", Transient(errors.New("HTTP 503")), 3},
		{"says it is not transient", statusErr(404), 1},
		{"says it is transient", statusErr(429), 3},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, 3},
		{"wrapped reset", fmt.Errorf("read body: %w", syscall.ECONNRESET), 3},
		{"body cut short", fmt.Errorf("copy: %w", io.ErrUnexpectedEOF), 3},
		{"dns", &net.DNSError{Err: "no such host", Name: "example.invalid"}, 3},
		{"deadline", fmt.Errorf("fetch: %w", context.DeadlineExceeded), 1},
		{"permanent network error", Permanent(syscall.ECONNRESET), 1},
	} {
		calls := 0
		Retry(context.Background(), 3, time.Millisecond, func(context.Context) error {
			calls++
			return tc.err
		})
		if calls != tc.want {
			t.Errorf("%s: %d calls, want %d", tc.name, calls, tc.want)
		}
	}
}

type statusErr int

func (e statusErr) Error() string   { return fmt.Sprintf("HTTP %d", int(e)) }
func (e statusErr) Transient() bool { return e >= 500 || e == 429 }

func TestRetryStopsOnCancel(t *testing.T) {
	fakeClock(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Retry(ctx, 10, time.Millisecond, func(context.Context) error {
		if calls++; calls == 2 {
			cancel()
		}
		return errFlaky
	})
	if calls != 2 || !errors.Is(err, errFlaky) {
		t.Errorf("calls=%d err=%v", calls, err)
	}
}

func TestRetryCanceledDuringPause(t *testing.T) {
	// The real pause, with a long base, ends as soon as ctx is canceled.
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Retry(ctx, 3, time.Hour, func(context.Context) error {
		calls++
		time.AfterFunc(10*time.Millisecond, cancel)
		return errFlaky
	})
	if calls != 1 || !errors.Is(err, errFlaky) || !errors.Is(err, context.Canceled) {
		t.Errorf("calls=%d err=%v", calls, err)
	}
}
