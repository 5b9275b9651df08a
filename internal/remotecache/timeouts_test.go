package remotecache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/provenance"
	"github.com/edgepipe/edgepipe/internal/testseaweed"
)

// hungListener accepts connections on loopback and never answers them;
// it holds them open until the test ends.
func hungListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

var testTimeouts = Timeouts{Connect: 2 * time.Second, Request: 300 * time.Millisecond}

// A server that accepts and never answers: each operation gives up after
// the request timeout, the third failure in a row takes the store out with
// one message, and from then on nothing waits on it.
func TestHungServerTimesOutAndIsDroppedAfterThreeFailures(t *testing.T) {
	useCreds(t, testCreds)
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	addr := hungListener(t)
	for _, url := range []string{"s3::http://" + addr + "/bucket/prefix", "oci://" + addr + "/team/cache"} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			// Bounded, so that a store without timeouts fails the test
			// instead of hanging it.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := Open(ctx, url, Options{Mode: ReadWrite, Timeouts: testTimeouts})
			if err != nil {
				t.Fatal(err)
			}
			key := strings.Repeat("ab", 32)
			for i := 1; i <= maxFailures; i++ {
				start := time.Now()
				rec, err := s.Lookup(ctx, key, stepOf(key))
				took := time.Since(start)
				if rec != nil || err == nil || took > 5*time.Second {
					t.Fatalf("lookup %d: %v, %v after %v; want a timeout within seconds", i, rec, err, took)
				}
				var te *TimeoutError
				if !errors.As(err, &te) || !strings.Contains(err.Error(), "did not answer") {
					t.Fatalf("lookup %d: %v, want a TimeoutError", i, err)
				}
				if down := strings.Contains(err.Error(), "not used for the rest of this run"); down != (i == maxFailures) {
					t.Fatalf("lookup %d: %v", i, err)
				}
			}
			start := time.Now()
			if rec, err := s.Lookup(ctx, key, stepOf(key)); rec != nil || err != nil {
				t.Fatalf("lookup once down: %v, %v; want a quiet miss", rec, err)
			}
			if e, err := s.Fetch(ctx, openCache(t), key, stepOf(key)); e != nil || err != nil {
				t.Fatalf("fetch once down: %v, %v; want a quiet miss", e, err)
			}
			ent := commitEntry(t, openCache(t), key, map[string]string{"a": "b"})
			var quiet interface{ Quiet() bool }
			if err := s.Upload(ctx, ent, false); err == nil || !errors.As(err, &quiet) {
				t.Fatalf("upload once down: %v; want the quiet error", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Fatalf("a store that is down still took %v", took)
			}
		})
	}
}

// A server that answers, then stops sending in the middle of an object:
// the download gives up after the request timeout.
func TestStalledDownloadTimesOut(t *testing.T) {
	useCreds(t, testCreds)
	key := "abcd0005"
	body := strings.Repeat("w", 4096)
	made := commitEntry(t, openCache(t), key, map[string]string{"model.bin": body})
	payload, _ := json.Marshal(Record{Key: key, Kind: "test", StepID: "step:abcd", Tree: made.Tree})
	record, _ := json.Marshal(&provenance.Envelope{Payload: payload, PayloadType: RecordType, Signatures: []provenance.Signature{}})
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/ac/"+key+".json"):
			w.Header().Set("Content-Length", fmt.Sprint(len(record)))
			w.Write(record)
		case strings.Contains(r.URL.Path, "/cas/sha256/"):
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			io.WriteString(w, body[:100])
			w.(http.Flusher).Flush()
			select {
			case <-done:
			case <-r.Context().Done():
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	defer close(done)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Open(ctx, "s3::"+srv.URL+"/bucket/prefix", Options{Mode: Read, Timeouts: testTimeouts})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ent, err := s.Fetch(ctx, openCache(t), key, stepOf(key))
	var te *TimeoutError
	if ent != nil || !errors.As(err, &te) || time.Since(start) > 5*time.Second {
		t.Fatalf("a stalled object: %v, %v after %v; want a timeout within seconds", ent, err, time.Since(start))
	}
}

func TestParseTimeouts(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if got, err := ParseTimeouts(get); err != nil || got != DefaultTimeouts {
		t.Fatalf("unset: %v, %v", got, err)
	}
	env[EnvConnectTimeout], env[EnvTimeout] = "1s", "250ms"
	if got, err := ParseTimeouts(get); err != nil || got != (Timeouts{Connect: time.Second, Request: 250 * time.Millisecond}) {
		t.Fatalf("set: %v, %v", got, err)
	}
	for _, bad := range []string{"10", "-1s", "0s", "soon"} {
		env[EnvTimeout] = bad
		if _, err := ParseTimeouts(get); err == nil || !strings.Contains(err.Error(), EnvTimeout) {
			t.Errorf("%s=%s: %v", EnvTimeout, bad, err)
		}
	}
}

// testCreds are credentials for servers that check none.
var testCreds = testseaweed.Credentials{AccessKey: "test", SecretKey: "test"}
