package hf

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeHub speaks the parts of the Hub protocol the client uses: the revision
// API, HEAD and GET on resolve with X-Repo-Commit / X-Linked-Etag /
// X-Linked-Size / ETag, a 302 from resolve to a CDN on another host for LFS
// files, and Range with If-Range on both.
type fakeHub struct {
	hub, cdn *httptest.Server
	// token, when set, is required on every Hub request.
	token string

	mu       sync.Mutex
	repos    map[string]*fakeRepo // "models/org/name"
	requests []seenRequest
	served   map[string]int64 // body bytes sent per repo file path
	// Fault injection, per repo file path.
	cutAfter    map[string]int64 // drop the connection after N bytes, once
	stallAfter  map[string]int64 // send N bytes, then wait for the client to go away, once
	corrupt     map[string]bool  // flip a byte of what is sent
	ignoreRange bool             // answer 200 with the whole file to Range requests
	omitSHA     bool             // leave sha out of the revision API
	echoAuth    bool             // put the Authorization header into error bodies
}

type fakeRepo struct {
	kind, id, commit string
	files            map[string][]byte
	lfs              map[string]bool
}

type seenRequest struct {
	Server, Method, Path, Range, IfRange, Auth string
}

func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	h := &fakeHub{
		repos:      map[string]*fakeRepo{},
		served:     map[string]int64{},
		cutAfter:   map[string]int64{},
		stallAfter: map[string]int64{},
		corrupt:    map[string]bool{},
	}
	h.hub = httptest.NewServer(http.HandlerFunc(h.serveHub))
	// Same IP, other port: a different host, yet one Go's own redirect
	// policy would still send the Authorization header to.
	h.cdn = httptest.NewServer(http.HandlerFunc(h.serveCDN))
	t.Cleanup(h.hub.Close)
	t.Cleanup(h.cdn.Close)
	return h
}

// addRepo stores a repository; files named in lfs are served as LFS files.
func (h *fakeHub) addRepo(kind, id string, files map[string][]byte, lfs ...string) *fakeRepo {
	c := make([]byte, 20)
	_, _ = rand.Read(c)
	r := &fakeRepo{kind: kind, id: id, commit: hex.EncodeToString(c), files: files, lfs: map[string]bool{}}
	for _, f := range lfs {
		r.lfs[f] = true
	}
	h.mu.Lock()
	h.repos[kind+"s/"+id] = r
	h.mu.Unlock()
	return r
}

func (h *fakeHub) record(server string, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests = append(h.requests, seenRequest{
		Server: server, Method: r.Method, Path: r.URL.Path,
		Range: r.Header.Get("Range"), IfRange: r.Header.Get("If-Range"), Auth: r.Header.Get("Authorization"),
	})
}

func (h *fakeHub) seen() []seenRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]seenRequest(nil), h.requests...)
}

func (h *fakeHub) bytesServed(file string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.served[file]
}

func (h *fakeHub) fail(w http.ResponseWriter, r *http.Request, code int, errCode, msg string) {
	if h.echoAuth {
		msg += " (you sent " + r.Header.Get("Authorization") + ")"
	}
	w.Header().Set("X-Error-Code", errCode)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func (h *fakeHub) serveHub(w http.ResponseWriter, r *http.Request) {
	h.record("hub", r)
	if h.token != "" && r.Header.Get("Authorization") != "Bearer "+h.token {
		h.fail(w, r, http.StatusUnauthorized, "RepoNotFound", "Invalid credentials in Authorization header")
		return
	}
	segs := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	unescape := func(s string) string { u, _ := url.PathUnescape(s); return u }
	if len(segs) == 6 && segs[0] == "api" && segs[4] == "revision" {
		h.serveRevision(w, r, segs[1]+"/"+segs[2]+"/"+segs[3], unescape(segs[5]))
		return
	}
	kind := "models"
	if segs[0] == "datasets" {
		kind, segs = "datasets", segs[1:]
	}
	if len(segs) < 5 || segs[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	var parts []string
	for _, s := range segs[4:] {
		parts = append(parts, unescape(s))
	}
	h.serveResolve(w, r, kind+"/"+segs[0]+"/"+segs[1], unescape(segs[3]), strings.Join(parts, "/"))
}

func (h *fakeHub) repo(key string) *fakeRepo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.repos[key]
}

func (h *fakeHub) serveRevision(w http.ResponseWriter, r *http.Request, key, rev string) {
	repo := h.repo(key)
	if repo == nil {
		h.fail(w, r, http.StatusNotFound, "RepoNotFound", "Repository not found")
		return
	}
	if rev != "main" && rev != repo.commit {
		h.fail(w, r, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	type sibling struct {
		RFilename string `json:"rfilename"`
	}
	out := struct {
		ID       string    `json:"id"`
		SHA      string    `json:"sha,omitempty"`
		Siblings []sibling `json:"siblings"`
	}{ID: repo.id}
	if !h.omitSHA {
		out.SHA = repo.commit
	}
	var names []string
	for name := range repo.files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, n := range names {
		out.Siblings = append(out.Siblings, sibling{n})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (h *fakeHub) serveResolve(w http.ResponseWriter, r *http.Request, key, rev, file string) {
	repo := h.repo(key)
	if repo == nil {
		h.fail(w, r, http.StatusNotFound, "RepoNotFound", "Repository not found")
		return
	}
	if rev != "main" && rev != repo.commit {
		h.fail(w, r, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	w.Header().Set("X-Repo-Commit", repo.commit)
	content, ok := repo.files[file]
	if !ok {
		h.fail(w, r, http.StatusNotFound, "EntryNotFound", "Entry not found")
		return
	}
	if repo.lfs[file] {
		sum := sha256Hex(content)
		w.Header().Set("X-Linked-Etag", `"`+sum+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(content)))
		w.Header().Set("ETag", `"`+sum+`"`)
		w.Header().Set("Location", h.cdn.URL+"/blobs/"+sum+"?repo="+url.QueryEscape(key)+"&file="+url.QueryEscape(file))
		w.WriteHeader(http.StatusFound)
		return
	}
	h.serveContent(w, r, file, gitBlobID(content), content)
}

func (h *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.record("cdn", r)
	repo := h.repo(r.URL.Query().Get("repo"))
	file := r.URL.Query().Get("file")
	if repo == nil || !repo.lfs[file] || "/blobs/"+sha256Hex(repo.files[file]) != r.URL.Path {
		http.NotFound(w, r)
		return
	}
	h.serveContent(w, r, file, sha256Hex(repo.files[file]), repo.files[file])
}

// serveContent sends a file with Range and If-Range support and the faults
// configured for it, counting the body bytes.
func (h *fakeHub) serveContent(w http.ResponseWriter, r *http.Request, file, etag string, content []byte) {
	h.mu.Lock()
	cut, cutOnce := h.cutAfter[file]
	delete(h.cutAfter, file)
	stall, stallOnce := h.stallAfter[file]
	delete(h.stallAfter, file)
	corrupt, ignoreRange := h.corrupt[file], h.ignoreRange
	h.mu.Unlock()

	if corrupt {
		content = bytes.Clone(content)
		content[len(content)/2] ^= 0xff
	}
	if ignoreRange {
		r.Header.Del("Range")
	}
	w.Header().Set("ETag", `"`+etag+`"`)
	cw := &countingWriter{ResponseWriter: w, hub: h, file: file}
	if cutOnce && r.Method == http.MethodGet {
		w.Header().Set("Content-Length", fmt.Sprint(len(content)))
		w.WriteHeader(http.StatusOK)
		_, _ = cw.Write(content[:cut])
		w.(http.Flusher).Flush()
		// Aborting drops the connection mid-body, as a network failure would.
		panic(http.ErrAbortHandler)
	}
	if stallOnce && r.Method == http.MethodGet {
		w.Header().Set("Content-Length", fmt.Sprint(len(content)))
		w.WriteHeader(http.StatusOK)
		_, _ = cw.Write(content[:stall])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(content))
}

type countingWriter struct {
	http.ResponseWriter
	hub  *fakeHub
	file string
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.hub.mu.Lock()
	c.hub.served[c.file] += int64(n)
	c.hub.mu.Unlock()
	return n, err
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func gitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
