package remotecache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/provenance"
)

// memBackend is a store in memory, for records a real writer never makes.
type memBackend struct {
	mu      sync.Mutex
	objects map[string][]byte
	gets    atomic.Int64 // of cas objects
	// onRead, when set, runs before each read of a cas object.
	onRead func()
}

func newMem() *memBackend { return &memBackend{objects: map[string][]byte{}} }

func (m *memBackend) String() string { return "mem://test" }

func (m *memBackend) get(_ context.Context, name string, _ int64) (obj, error) {
	m.mu.Lock()
	b, ok := m.objects[name]
	m.mu.Unlock()
	if !ok {
		return nil, errNotFound
	}
	if strings.HasPrefix(name, "cas/") {
		m.gets.Add(1)
		return &hookReader{r: bytes.NewReader(b), before: m.onRead}, nil
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (m *memBackend) exists(_ context.Context, name string, _ int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.objects[name]
	return ok, nil
}

func (m *memBackend) put(_ context.Context, name string, r io.ReadSeeker, _ int64, _ string, _ bool) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.objects[name] = b
	m.mu.Unlock()
	return nil
}

type hookReader struct {
	r      io.Reader
	before func()
}

func (h *hookReader) Read(p []byte) (int, error) {
	if h.before != nil {
		h.before()
	}
	return h.r.Read(p)
}

func (h *hookReader) Close() error { return nil }

// putRecord stores rec (as a writer would, unsigned) under its key.
func (m *memBackend) putRecord(t *testing.T, rec Record) {
	t.Helper()
	payload, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(&provenance.Envelope{Payload: payload, PayloadType: RecordType, Signatures: []provenance.Signature{}})
	if err != nil {
		t.Fatal(err)
	}
	m.objects[recordName(rec.Key)] = raw
}

func memStore(m *memBackend) *Store {
	return &Store{URL: "mem://test", opt: Options{Mode: ReadWrite}, be: m, timeouts: DefaultTimeouts}
}

func fileOf(path string, body []byte) digest.FileDigest {
	sum := sha256.Sum256(body)
	return digest.FileDigest{Path: path, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(body))}
}

func recordOf(key string, files ...digest.FileDigest) Record {
	var size int64
	for _, f := range files {
		size += f.Size
	}
	return Record{Key: key, Kind: "test", StepID: "step:" + key[:4], Tree: digest.TreeDigest{SHA256: strings.Repeat("0", 64), Files: files, Size: size}}
}

// A record that lists fewer bytes than its object holds: the fetch is
// refused as a longer object, and the copy under it never writes past the
// record's size, even by a byte.
func TestDownloadNeverWritesPastTheRecordsSize(t *testing.T) {
	m := newMem()
	key := "abcd0001"
	body := bytes.Repeat([]byte("x"), 64)
	f := fileOf("big.bin", body[:8])
	m.objects[casName(f.SHA256)] = body
	m.putRecord(t, recordOf(key, f))
	ent, err := memStore(m).Fetch(context.Background(), openCache(t), key, stepOf(key))
	if ent != nil || err == nil || !strings.Contains(err.Error(), "big.bin: its object is corrupt (longer than the 8 bytes the record says)") {
		t.Fatalf("a longer object: %v, %v", ent, err)
	}
	for _, tc := range []struct {
		src        string
		size, want int64
	}{{"0123456789", 4, 5}, {"0123", 4, 4}, {"01", 4, 2}, {"", 0, 0}, {"x", 0, 1}} {
		var dst bytes.Buffer
		n, err := copyAtMost(&dst, strings.NewReader(tc.src), tc.size)
		if err != nil || n != tc.want || int64(dst.Len()) > tc.size || dst.String() != tc.src[:min(len(tc.src), int(tc.size))] {
			t.Errorf("copyAtMost(%q, %d) = %d, %v, wrote %q; want n %d and at most %d bytes written", tc.src, tc.size, n, err, dst.String(), tc.want, tc.size)
		}
	}
}

// A record that claims more bytes than the cache's disk has free is
// refused before any object is requested.
func TestFetchRefusesARecordLargerThanTheFreeSpace(t *testing.T) {
	if _, known, _ := freeBytes(t.TempDir()); !known {
		t.Skip("free space is not known on this system")
	}
	m := newMem()
	key := "abcd0002"
	f := fileOf("huge.bin", []byte("tiny really"))
	f.Size = 1 << 60 // an exbibyte
	m.objects[casName(f.SHA256)] = []byte("tiny really")
	m.putRecord(t, recordOf(key, f))
	c := openCache(t)
	ent, err := memStore(m).Fetch(context.Background(), c, key, stepOf(key))
	if ent != nil || err == nil || !strings.Contains(err.Error(), "free in the file system of the cache at "+c.Root()) {
		t.Fatalf("an exbibyte record: %v, %v", ent, err)
	}
	if n := m.gets.Load(); n != 0 {
		t.Fatalf("%d objects were requested for a record that cannot fit", n)
	}
}

// A record listing more files than any step writes is refused from its
// count, before a single file is looked at.
func TestRecordWithTooManyFilesIsRefusedEarly(t *testing.T) {
	m := newMem()
	key := "abcd0003"
	files := make([]digest.FileDigest, maxRecordFiles+1)
	for i := range files {
		files[i] = fileOf(fmt.Sprintf("f/%06d", i), []byte{byte(i)})
	}
	m.putRecord(t, recordOf(key, files...))
	start := time.Now()
	ent, err := memStore(m).Fetch(context.Background(), openCache(t), key, stepOf(key))
	if ent != nil || err == nil || !strings.Contains(err.Error(), fmt.Sprintf("lists %d files, more than the %d any step writes", len(files), maxRecordFiles)) {
		t.Fatalf("a record of %d files: %v, %v", len(files), ent, err)
	}
	if n := m.gets.Load(); n != 0 {
		t.Fatalf("%d objects were requested", n)
	}
	t.Logf("refused in %v", time.Since(start))
}

// A record under the right key that names another step or kind, or a step
// no plan could make, is not used, and nothing of it reaches the cache;
// the same record with the asking step's id and kind is a hit.
func TestRecordOfAnotherStepIsRefused(t *testing.T) {
	key := "abcd0004"
	files := map[string]string{"model.bin": "weights"}
	made := commitEntry(t, openCache(t), key, files)
	for name, tc := range map[string]struct {
		kind, id, want string
	}{
		"the step":     {"test", "step:abcd", ""},
		"evil id":      {"test", "evil step", `its step: "evil step" is not a step id`},
		"terminal":     {"test", "step:\x1b[2J", `not printable ASCII`},
		"other step":   {"test", "step:else", `it is the record of step "step:else" (kind test), not of step "step:abcd"`},
		"other kind":   {"gguf-quantize", "step:abcd", `it is the record of step "step:abcd" (kind gguf-quantize), not of step "step:abcd" (kind test)`},
		"evil kind":    {"Test Kind", "step:abcd", `its kind: "Test Kind" is not a step kind`},
		"missing kind": {"", "step:abcd", `its kind`},
	} {
		t.Run(name, func(t *testing.T) {
			m := newMem()
			for _, f := range made.Tree.Files {
				m.objects[casName(f.SHA256)] = []byte(files[f.Path])
			}
			m.putRecord(t, Record{Key: key, Kind: tc.kind, StepID: tc.id, Tree: made.Tree})
			c := openCache(t)
			s := memStore(m)
			ent, err := s.Fetch(context.Background(), c, key, stepOf(key))
			if tc.want == "" {
				if ent == nil || err != nil || ent.StepID != "step:abcd" {
					t.Fatalf("the record of the step that asked: %v, %v", ent, err)
				}
				return
			}
			if ent != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, %v; want an error with %q", ent, err, tc.want)
			}
			if strings.ContainsRune(err.Error(), 0x1b) {
				t.Fatalf("the error echoes an escape sequence: %q", err)
			}
			if _, hit, _ := c.Lookup(key); hit {
				t.Fatal("the record was committed to the local cache")
			}
			if files, err := s.Files(context.Background(), key, stepOf(key)); files != nil || err == nil {
				t.Fatalf("Files: %v, %v", files, err)
			}
			if s.Stats.Rejected.Load() != 1 || m.gets.Load() != 0 {
				t.Fatalf("rejected %d, objects fetched %d", s.Stats.Rejected.Load(), m.gets.Load())
			}
		})
	}
}
