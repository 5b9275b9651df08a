package remotecache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// Environment variables that set the timeouts (Go durations: 500ms, 30s).
const (
	EnvConnectTimeout = "EDGEPIPE_REMOTE_CACHE_CONNECT_TIMEOUT"
	EnvTimeout        = "EDGEPIPE_REMOTE_CACHE_TIMEOUT"
)

// Timeouts bound every operation on the remote cache, so that a server
// that accepts connections and never answers costs a run a few timeouts
// (then the breaker takes the store out), never the run itself.
type Timeouts struct {
	// Connect bounds opening a connection: the TCP connect and the TLS
	// handshake.
	Connect time.Duration
	// Request bounds how long an operation waits on the server without
	// progress: for an answer, or between two reads or writes of a
	// transfer. It is not a bound on a whole transfer: a large object
	// takes as long as it takes, as long as bytes move.
	Request time.Duration
}

// DefaultTimeouts are generous for a store across the internet: a healthy
// S3 endpoint or registry answers within a second or two.
var DefaultTimeouts = Timeouts{Connect: 10 * time.Second, Request: 60 * time.Second}

// ParseTimeouts reads the timeouts from the environment: unset is the
// default, anything else must be a positive Go duration.
func ParseTimeouts(getenv func(string) string) (Timeouts, error) {
	t := DefaultTimeouts
	for _, v := range []struct {
		env string
		d   *time.Duration
	}{{EnvConnectTimeout, &t.Connect}, {EnvTimeout, &t.Request}} {
		s := getenv(v.env)
		if s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return t, fmt.Errorf("%s=%q is not a positive duration: write one such as 30s or 2m", v.env, s)
		}
		*v.d = d
	}
	return t, nil
}

func (t Timeouts) orDefault() Timeouts {
	if t.Connect <= 0 {
		t.Connect = DefaultTimeouts.Connect
	}
	if t.Request <= 0 {
		t.Request = DefaultTimeouts.Request
	}
	return t
}

// s3HTTPClient is the AWS SDK's own client with the connect timeout; the
// SDK's retries stay (they are what S3 asks of clients), and the store's
// watchdog bounds them.
func (t Timeouts) s3HTTPClient() *http.Client {
	bc := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = t.Connect }).
		WithTransportOptions(func(tr *http.Transport) { tr.TLSHandshakeTimeout = t.Connect })
	return &http.Client{Transport: bc.GetTransport()}
}

// ociHTTPClient is oras-go's retrying client over a transport with the
// connect timeout.
func (t Timeouts) ociHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: t.Connect, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = t.Connect
	return &http.Client{Transport: retry.NewTransport(tr)}
}

// TimeoutError is an operation the server did not answer in time. It is a
// net.Error, so the breaker counts it.
type TimeoutError struct {
	Op    string
	After time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s: the server did not answer for %s (a hung server; %s raises the limit if it is only slow)", e.Op, e.After, EnvTimeout)
}

// Timeout reports that it is a timeout (net.Error).
func (e *TimeoutError) Timeout() bool { return true }

// Temporary is part of net.Error.
func (e *TimeoutError) Temporary() bool { return true }

var _ net.Error = (*TimeoutError)(nil)

// watchdog cancels an operation's context once it has made no progress
// for its limit; kick records progress.
type watchdog struct {
	op     string
	limit  time.Duration
	timer  *time.Timer
	cancel context.CancelCauseFunc
	ctx    context.Context
	once   sync.Once
}

var errStalled = errors.New("stalled")

func (s *Store) watch(ctx context.Context, op string) (context.Context, *watchdog) {
	wctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{op: op, limit: s.timeouts.Request, cancel: cancel, ctx: wctx}
	w.timer = time.AfterFunc(w.limit, func() { cancel(errStalled) })
	return wctx, w
}

func (w *watchdog) kick() { w.timer.Reset(w.limit) }

func (w *watchdog) stop() {
	w.once.Do(func() {
		w.timer.Stop()
		w.cancel(nil)
	})
}

// explain turns what the watchdog caused into a TimeoutError; any other
// error is returned as it is.
func (w *watchdog) explain(err error) error {
	if err != nil && errors.Is(context.Cause(w.ctx), errStalled) {
		return &TimeoutError{Op: w.op, After: w.limit}
	}
	return err
}

// watchedObj is an object being read under its operation's watchdog:
// every read is progress, and Close ends the operation.
type watchedObj struct {
	obj
	w *watchdog
	s *Store
}

func (o *watchedObj) Read(p []byte) (int, error) {
	n, err := o.obj.Read(p)
	if n > 0 {
		o.w.kick()
	}
	if err != nil && err != io.EOF {
		err = o.s.observe(o.w.explain(err))
	}
	return n, err
}

func (o *watchedObj) Close() error {
	err := o.obj.Close()
	o.w.stop()
	return err
}

// watchedBody is an upload's body: each read the client makes of it is
// progress.
type watchedBody struct {
	io.ReadSeeker
	w *watchdog
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadSeeker.Read(p)
	if n > 0 {
		b.w.kick()
	}
	return n, err
}

// The SDK sizes and rewinds a body it may retry: watchedBody keeps Seek.
var _ io.ReadSeeker = (*watchedBody)(nil)

// get opens an object under a watchdog; reading it is part of the same
// operation, which ends when it is closed.
func (s *Store) get(ctx context.Context, name string, limit int64) (obj, error) {
	if s.down() {
		return nil, errDown
	}
	wctx, w := s.watch(ctx, "read "+name)
	o, err := s.be.get(wctx, name, limit)
	if err != nil {
		err = s.observe(w.explain(err))
		w.stop()
		return nil, err
	}
	s.observe(nil)
	return &watchedObj{obj: o, w: w, s: s}, nil
}

// exists asks whether an object is there, under a watchdog.
func (s *Store) exists(ctx context.Context, name string, size int64) (bool, error) {
	if s.down() {
		return false, errDown
	}
	wctx, w := s.watch(ctx, "look for "+name)
	defer w.stop()
	ok, err := s.be.exists(wctx, name, size)
	return ok, s.observe(w.explain(err))
}

// put uploads an object under a watchdog that each read of its body
// kicks.
func (s *Store) put(ctx context.Context, name string, r io.ReadSeeker, size int64, sha256Hex string, ifAbsent bool) error {
	if s.down() {
		return errDown
	}
	wctx, w := s.watch(ctx, "write "+name)
	defer w.stop()
	err := s.be.put(wctx, name, &watchedBody{ReadSeeker: r, w: w}, size, sha256Hex, ifAbsent)
	return s.observe(w.explain(err))
}
