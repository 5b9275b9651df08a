// Package remotecache shares completed step outputs between machines
// through S3-compatible object storage, beside the local cache (package
// cache) that stays the only thing steps read from.
//
// Layout under the URL's prefix:
//
//	cas/sha256/<hex>   one object per distinct file content (content-addressed)
//	ac/<key>.json      a step's record: a DSSE envelope whose payload lists
//	                   the output's files (path, sha256, size) and the step
//
// A writer uploads every object first and the record last, so a reader
// that finds a record finds everything it lists. Objects are immutable by
// name (their name is their digest); the record is written only if none
// exists (a conditional PUT, If-None-Match: *), so racing writers of one
// key are harmless: the first record wins, and both wrote the same bytes
// anyway when the step is reproducible.
//
// A reader trusts nothing it downloads: the record must name the key it
// was asked for, the step and kind that asked, at most maxRecordFiles
// clean relative paths, and no more bytes than the cache's disk has free;
// every object is written no further than its listed size and hashed
// while it streams into a temp dir of the local cache and must match the
// record; only then is the output committed locally (cache.Commit), where
// its tree digest is checked again. Any mismatch is a miss and a warning,
// never a hit. With a verification key, a record must also carry a valid
// signature by that key (records are signed by writers given --sign-key).
package remotecache

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/provenance"
	"github.com/edgepipe/edgepipe/internal/remote"
	"github.com/edgepipe/edgepipe/steps"
)

// Mode says what a run does with the remote cache.
type Mode string

// Modes: CI writes, laptops and pull requests read.
const (
	Read      Mode = "read"
	Write     Mode = "write"
	ReadWrite Mode = "readwrite"
)

// ParseMode checks a --remote-cache-mode value ("" is readwrite).
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "":
		return ReadWrite, nil
	case Read, Write, ReadWrite:
		return Mode(s), nil
	}
	return "", fmt.Errorf("--remote-cache-mode must be read, write or readwrite, not %q", s)
}

// Reads reports whether the mode looks entries up.
func (m Mode) Reads() bool { return m == Read || m == ReadWrite }

// Writes reports whether the mode uploads outputs.
func (m Mode) Writes() bool { return m == Write || m == ReadWrite }

// RecordType is the DSSE payload type of a record.
const RecordType = "application/vnd.edgepipe.remote-cache-record.v1+json"

// Record is what ac/<key>.json says of one output.
type Record struct {
	Key      string            `json:"key"`
	Kind     string            `json:"kind"`
	StepID   string            `json:"step_id"`
	Tree     digest.TreeDigest `json:"tree"`
	Created  time.Time         `json:"created"`
	Duration time.Duration     `json:"duration_ns"`
	Tools    map[string]string `json:"tools,omitempty"`
	// Writer is the edgepipe version that uploaded it.
	Writer string `json:"writer,omitempty"`
}

// Options configure a Store.
type Options struct {
	Mode Mode
	// Signer signs the records this store writes; nil leaves them unsigned.
	Signer *provenance.Signer
	// VerifyKey, when set, makes every record without a valid signature by
	// it a miss.
	VerifyKey crypto.PublicKey
	// Version is recorded as the records' writer.
	Version string
	// Timeouts bound every operation; zero fields are DefaultTimeouts'.
	Timeouts Timeouts
}

// Stats count what a store moved.
type Stats struct {
	Hits, Misses, Rejected       atomic.Int64
	BytesDown, BytesUp           atomic.Int64
	ObjectsDown, ObjectsUp       atomic.Int64
	RecordsUp, RecordsLostRace   atomic.Int64
	ObjectsSkipped, EntriesKnown atomic.Int64
}

// backend is the object storage a store talks to.
type backend interface {
	// get opens an object; a missing one is errNotFound.
	get(ctx context.Context, name string, limit int64) (obj, error)
	// exists reports whether an object of that size is there.
	exists(ctx context.Context, name string, size int64) (bool, error)
	// put writes an object from a file; with ifAbsent it writes only when
	// no object has the name, returning errExists otherwise.
	put(ctx context.Context, name string, f io.ReadSeeker, size int64, sha256Hex string, ifAbsent bool) error
	String() string
}

type obj interface {
	Read(p []byte) (int, error)
	Close() error
}

var (
	errNotFound = errors.New("not found")
	errExists   = errors.New("already exists")
)

// Store is an open remote cache.
type Store struct {
	URL      string
	opt      Options
	be       backend
	timeouts Timeouts
	Stats    Stats
	// failures counts transport errors in a row; at maxFailures the store
	// is down for the rest of the run (a circuit breaker: a dead remote
	// must not cost every step its timeouts).
	failures atomic.Int32
}

const maxFailures = 3

// errDown is what every call answers once the store is down.
var errDown = errors.New("unreachable: not used for the rest of this run")

func (s *Store) down() bool { return s.failures.Load() >= maxFailures }

// observe feeds the circuit breaker: an error the server did not answer
// (no connection, a timeout) counts, anything else resets the count.
func (s *Store) observe(err error) error {
	var ne net.Error
	if err != nil && errors.As(err, &ne) {
		if s.failures.Add(1) == maxFailures {
			return fmt.Errorf("%w (%d failures in a row; the last: %w)", errDown, maxFailures, err)
		}
		return err
	}
	s.failures.Store(0)
	return err
}

// Open parses url, s3::http(s)://HOST/BUCKET/PREFIX (credentials from the
// AWS SDK's standard chain) or oci://HOST[:PORT]/REPOSITORY (credentials
// from the Docker config), and connects.
func Open(ctx context.Context, url string, opt Options) (*Store, error) {
	if opt.Mode == "" {
		opt.Mode = ReadWrite
	}
	t := opt.Timeouts.orDefault()
	d, err := remote.Parse(url, false)
	if err != nil {
		return nil, fmt.Errorf("--remote-cache: %w", err)
	}
	switch d.Kind {
	case remote.KindS3:
		b, err := d.OpenS3(ctx, t.s3HTTPClient())
		if err != nil {
			return nil, fmt.Errorf("--remote-cache %s: %w", url, err)
		}
		return &Store{URL: url, opt: opt, be: &s3Backend{b: b, url: url}, timeouts: t}, nil
	case remote.KindOCI:
		repo, err := d.OCIRepository(t.ociHTTPClient())
		if err != nil {
			return nil, fmt.Errorf("--remote-cache %s: %w", url, err)
		}
		return &Store{URL: url, opt: opt, be: &ociBackend{repo: repo, url: url}, timeouts: t}, nil
	}
	return nil, fmt.Errorf("--remote-cache %s: unsupported", url)
}

// Mode is the store's mode.
func (s *Store) Mode() Mode { return s.opt.Mode }

func casName(sha256Hex string) string { return "cas/sha256/" + sha256Hex }
func recordName(key string) string    { return "ac/" + key + ".json" }

// recordLimit bounds a record's size: a listing of thousands of files.
const recordLimit = 8 << 20

// maxRecordFiles bounds the files a record may list, so a hostile record
// is refused before any work per file (a check, a request, a hash). The
// step outputs with the most files are MLC's weight shards, each under
// 32 MiB: a 70B model in q4f16_1 is about 1,200 shards, a 405B one about
// 7,000, and even a trillion parameters stay under 19,000.
const maxRecordFiles = 20_000

// Step is the plan step a record is looked up for: a record of any other
// step or kind under its key is refused.
type Step struct{ ID, Kind string }

// Lookup reads and checks key's record, which must be step's, without
// downloading its objects: nil without error is a miss. A record that
// fails a check is a miss and an error the caller reports as a warning.
func (s *Store) Lookup(ctx context.Context, key string, step Step) (*Record, error) {
	if s.down() {
		return nil, nil
	}
	o, err := s.get(ctx, recordName(key), recordLimit)
	if errors.Is(err, errNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("remote cache %s: read the record of %s: %w", s.be, short(key), err)
	}
	raw, err := readAll(o, recordLimit)
	o.Close()
	if err != nil {
		return nil, fmt.Errorf("remote cache %s: read the record of %s: %w", s.be, short(key), err)
	}
	rec, err := s.decode(key, step, raw)
	if err != nil {
		return nil, fmt.Errorf("remote cache %s: the record of %s is not trusted: %w", s.be, short(key), err)
	}
	return rec, nil
}

// decode opens a record's envelope, checks its signature when the store
// requires one, and checks the record itself.
func (s *Store) decode(key string, step Step, raw []byte) (*Record, error) {
	var env provenance.Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("not a DSSE envelope: %v", err)
	}
	if env.PayloadType != RecordType {
		return nil, fmt.Errorf("payload type %q, want %q", env.PayloadType, RecordType)
	}
	if s.opt.VerifyKey != nil {
		if len(env.Signatures) == 0 {
			return nil, errors.New("it is unsigned, and this reader requires a signature by its --remote-cache-verify-key")
		}
		if err := provenance.VerifyEnvelope(&env, s.opt.VerifyKey); err != nil {
			return nil, fmt.Errorf("its signature does not verify with --remote-cache-verify-key: %v", err)
		}
	}
	var rec Record
	dec := json.NewDecoder(strings.NewReader(string(env.Payload)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("payload: %v", err)
	}
	if rec.Key != key {
		return nil, fmt.Errorf("it is the record of %q, not of %s", short(rec.Key), short(key))
	}
	if err := checkStep(&rec, step); err != nil {
		return nil, err
	}
	if n := len(rec.Tree.Files); n > maxRecordFiles {
		return nil, fmt.Errorf("it lists %d files, more than the %d any step writes", n, maxRecordFiles)
	}
	seen := make(map[string]bool, len(rec.Tree.Files))
	var total int64
	for _, f := range rec.Tree.Files {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) || strings.Contains(f.Path, "\\") || f.Path != filepath.ToSlash(filepath.Clean(f.Path)) {
			return nil, fmt.Errorf("it lists the path %q, which is not a clean relative path", f.Path)
		}
		if seen[f.Path] || !isHex64(f.SHA256) || f.Size < 0 || f.Size > math.MaxInt64-total {
			return nil, fmt.Errorf("it lists %q twice or with a bad digest or size", f.Path)
		}
		seen[f.Path] = true
		total += f.Size
	}
	if total != rec.Tree.Size {
		return nil, fmt.Errorf("its files add up to %d bytes, it says %d", total, rec.Tree.Size)
	}
	// A file and a folder of one name cannot both exist.
	for p := range seen {
		for d := filepath.ToSlash(filepath.Dir(p)); d != "."; d = filepath.ToSlash(filepath.Dir(d)) {
			if seen[d] {
				return nil, fmt.Errorf("it lists %q both as a file and as a folder", d)
			}
		}
	}
	return &rec, nil
}

// checkStep refuses a record that is not of the step that asked: its
// step id and kind, which a reader's cache and `cache ls` show, must be
// the local plan's. Both are checked for form first, and quoted, so a
// hostile record cannot put control characters on a terminal.
func checkStep(rec *Record, step Step) error {
	if err := steps.CheckKind(rec.Kind); err != nil {
		return fmt.Errorf("its kind: %v", err)
	}
	if err := steps.CheckID(rec.StepID); err != nil {
		return fmt.Errorf("its step: %v", err)
	}
	if rec.Kind != step.Kind || rec.StepID != step.ID {
		return fmt.Errorf("it is the record of step %q (kind %s), not of step %q (kind %s) that looked it up", rec.StepID, rec.Kind, step.ID, step.Kind)
	}
	return nil
}

// Fetch looks key up remotely for step and, on a hit, downloads the output
// into the local cache and returns its local entry. The caller holds key's
// local lock. A miss is (nil, nil); a record or object that fails a check
// is (nil, error): a miss the caller reports as a warning.
func (s *Store) Fetch(ctx context.Context, c *cache.Cache, key string, step Step) (*cache.Entry, error) {
	if !s.opt.Mode.Reads() {
		return nil, nil
	}
	rec, err := s.Lookup(ctx, key, step)
	if rec == nil {
		if err != nil && !unanswered(err) {
			s.Stats.Rejected.Add(1)
		} else {
			s.Stats.Misses.Add(1)
		}
		return nil, err
	}
	tmp, err := c.TempDir(key)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			c.Abort(tmp)
		}
	}()
	if err := fits(c.Root(), rec.Tree.Size); err != nil {
		s.Stats.Rejected.Add(1)
		return nil, fmt.Errorf("remote cache %s: step %s (entry %s): %w; the step runs here instead", s.be, rec.StepID, short(key), err)
	}
	for _, f := range rec.Tree.Files {
		if err := s.download(ctx, f, filepath.Join(tmp, filepath.FromSlash(f.Path))); err != nil {
			s.Stats.Rejected.Add(1)
			return nil, fmt.Errorf("remote cache %s: step %s (entry %s): %w; the step runs here instead", s.be, rec.StepID, short(key), err)
		}
	}
	ent, err := c.Commit(key, tmp, cache.Entry{Kind: rec.Kind, StepID: rec.StepID, Created: rec.Created,
		Duration: rec.Duration, Tools: rec.Tools, Meta: map[string]any{"remote_cache": s.URL}})
	if err != nil {
		return nil, err
	}
	committed = true
	if ent.Tree.SHA256 != rec.Tree.SHA256 {
		// Cannot happen when every file matched; checked all the same.
		c.Evict(key)
		s.Stats.Rejected.Add(1)
		return nil, fmt.Errorf("remote cache %s: step %s (entry %s): the downloaded tree has digest %s, the record says %s", s.be, rec.StepID, short(key), ent.Tree.SHA256, rec.Tree.SHA256)
	}
	s.Stats.Hits.Add(1)
	return ent, nil
}

func short(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// Files reads key's record, which must be step's, and returns its files
// (nil for a miss): what a cache key needs of an input, without
// downloading it.
func (s *Store) Files(ctx context.Context, key string, step Step) ([]digest.FileDigest, error) {
	if !s.opt.Mode.Reads() {
		return nil, nil
	}
	rec, err := s.Lookup(ctx, key, step)
	if rec == nil {
		return nil, err
	}
	if rec.Tree.Files == nil {
		return []digest.FileDigest{}, nil
	}
	return rec.Tree.Files, nil
}
