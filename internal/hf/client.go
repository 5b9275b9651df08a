package hf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultEndpoint is the public Hub.
const DefaultEndpoint = "https://huggingface.co"

// Client talks to one Hub endpoint and owns one cache directory.
type Client struct {
	// Endpoint is HF_ENDPOINT, without a trailing slash.
	Endpoint string
	// Token is HF_TOKEN or the contents of $HF_HOME/token. It is sent only to
	// Endpoint's host and never printed, logged or marshalled.
	Token string `json:"-"`
	// CacheDir is HF_HUB_CACHE, or $HF_HOME/hub, or ~/.cache/huggingface/hub.
	CacheDir string
	// Offline is HF_HUB_OFFLINE: resolve from refs/ and snapshots/ only.
	Offline bool
	// HTTP is the client to use; nil means one with header timeouts and no
	// overall timeout (model files take long).
	HTTP *http.Client `json:"-"`
	// Parallel is how many files download at once; 0 means 4.
	Parallel int
	// Progress, when set, is called as bytes arrive. Calls are serialised.
	Progress func(file string, done, total int64) `json:"-"`
	// Logf, when set, receives one line per notable event (resolved commit,
	// resumed or restarted download). Calls are serialised; lines never
	// contain the token.
	Logf func(format string, args ...any) `json:"-"`
}

// FromEnv builds a Client from the environment variables huggingface_hub reads.
func FromEnv() *Client {
	home := os.Getenv("HF_HOME")
	if home == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			if h, err := os.UserHomeDir(); err == nil {
				cache = filepath.Join(h, ".cache")
			}
		}
		home = filepath.Join(cache, "huggingface")
	}
	c := &Client{Endpoint: DefaultEndpoint, CacheDir: filepath.Join(home, "hub")}
	if e := os.Getenv("HF_ENDPOINT"); e != "" {
		c.Endpoint = strings.TrimRight(e, "/")
	}
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		c.CacheDir = d
	} else if d := os.Getenv("HUGGINGFACE_HUB_CACHE"); d != "" {
		c.CacheDir = d
	}
	c.Token = os.Getenv("HF_TOKEN")
	if c.Token == "" {
		c.Token = os.Getenv("HUGGING_FACE_HUB_TOKEN")
	}
	if c.Token == "" {
		path := os.Getenv("HF_TOKEN_PATH")
		if path == "" {
			path = filepath.Join(home, "token")
		}
		if b, err := os.ReadFile(path); err == nil {
			c.Token = strings.TrimSpace(string(b))
		}
	}
	switch strings.ToUpper(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "ON", "YES", "TRUE":
		c.Offline = true
	}
	return c
}

// String describes the client without its token.
func (c Client) String() string {
	tok := "unset"
	if c.Token != "" {
		tok = "set"
	}
	return fmt.Sprintf("hf.Client{Endpoint: %s, CacheDir: %s, Offline: %t, Token: %s}", c.Endpoint, c.CacheDir, c.Offline, tok)
}

// GoString keeps %#v from printing the token.
func (c Client) GoString() string { return c.String() }

func (c *Client) endpoint() string {
	if c.Endpoint == "" {
		return DefaultEndpoint
	}
	return strings.TrimRight(c.Endpoint, "/")
}

func (c *Client) parallel() int {
	if c.Parallel > 0 {
		return c.Parallel
	}
	return 4
}

// redact removes the token from text that may have echoed it (a server error
// body, a proxy's message).
func (c *Client) redact(s string) string {
	if c.Token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.Token, "[redacted]")
}

// redactErr applies redact to an error. The result keeps the original chain
// for errors.Is only when nothing was redacted, so the token cannot leak
// through Unwrap.
func (c *Client) redactErr(err error) error {
	if err == nil || c.Token == "" || !strings.Contains(err.Error(), c.Token) {
		return err
	}
	return errors.New(c.redact(err.Error()))
}

// httpClient returns a client whose redirect policy drops the Authorization
// header when a redirect leaves the original host: Go itself keeps it for
// subdomains and for other ports of the same host, and a CDN must never see
// the token.
func (c *Client) httpClient() *http.Client {
	base := c.HTTP
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = 60 * time.Second
		base = &http.Client{Transport: t}
	}
	hc := *base
	prev := base.CheckRedirect
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if req.URL.Host != via[0].URL.Host {
			req.Header.Del("Authorization")
		}
		if prev != nil {
			return prev(req, via)
		}
		return nil
	}
	return &hc
}

// newRequest builds a request to the Hub with the token attached.
func (c *Client) newRequest(ctx context.Context, method, path string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint()+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "edgepipe")
	// Identity encoding keeps Content-Length and byte ranges about the file
	// itself, as huggingface_hub does.
	req.Header.Set("Accept-Encoding", "identity")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// hubError turns a non-success Hub response into a sentence that says what to do.
func (c *Client) hubError(repo Repo, what string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	detail := strings.TrimSpace(string(body))
	var msg struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &msg) == nil && msg.Error != "" {
		detail = msg.Error
	}
	if detail != "" {
		detail = " (" + c.redact(detail) + ")"
	}
	code := resp.Header.Get("X-Error-Code")
	var hint string
	switch {
	case code == "GatedRepo":
		hint = "the repository is gated: accept its terms on its Hub page and set HF_TOKEN to a token of that account"
	case code == "RevisionNotFound":
		hint = fmt.Sprintf("revision %q does not exist: check the @revision in the source", repo.Revision)
	case code == "EntryNotFound":
		hint = "the file does not exist at this revision"
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		hint = "the Hub refused access: if the repository is private or gated, set HF_TOKEN to a token with read access"
	case resp.StatusCode == http.StatusNotFound || code == "RepoNotFound":
		hint = "the repository was not found: check the name, or set HF_TOKEN if it is private"
	case resp.StatusCode == http.StatusTooManyRequests:
		hint = "the Hub is rate-limiting requests: wait and retry, or set HF_TOKEN"
	default:
		hint = "the Hub answered with an error: retry later"
	}
	return &StatusError{Code: resp.StatusCode, msg: fmt.Sprintf("%s: %s: HTTP %d%s: %s", repo, what, resp.StatusCode, detail, hint)}
}

// StatusError is a Hub answer other than success.
type StatusError struct {
	Code int
	msg  string
}

func (e *StatusError) Error() string { return e.msg }

// Transient: a server error or rate limiting may pass; a 4xx will not.
func (e *StatusError) Transient() bool {
	return e.Code >= 500 || e.Code == http.StatusTooManyRequests
}
