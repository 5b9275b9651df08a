package digest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgepipe/edgepipe/internal/atomicfile"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
)

// fileIdentity is what must be unchanged for a remembered digest to still
// hold. Writing a file moves its mtime and ctime, replacing it changes the
// inode, and ctime cannot be set back the way touch sets mtime, so together
// they catch every ordinary change without reading a byte.
type fileIdentity struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	CtimeNs int64  `json:"ctime_ns"`
}

type memoEntry struct {
	fileIdentity
	SHA256 string `json:"sha256"`
}

type memoFile struct {
	Version int                  `json:"version"`
	Entries map[string]memoEntry `json:"entries"`
}

const memoVersion = 1

// A write that lands in the same timestamp tick as the previous one leaves
// mtime and ctime unchanged, so a digest taken just after a write could be
// outlived by a second write that the identity cannot see. As in git's "racy
// clean" rule, a digest is remembered only when the file's timestamps are
// older than the start of hashing by more than a tick; a file written just
// before it was hashed is hashed once more on the next run. Timestamps with
// whole-second resolution (FAT, some network filesystems) get a wider window.
var (
	racyWindowFine   = 100 * time.Millisecond
	racyWindowCoarse = 2 * time.Second
)

func racy(id fileIdentity, hashStart time.Time) bool {
	window := racyWindowFine
	if id.MtimeNs%int64(time.Second) == 0 && id.CtimeNs%int64(time.Second) == 0 {
		window = racyWindowCoarse
	}
	newest := max(id.MtimeNs, id.CtimeNs)
	return newest > hashStart.UnixNano()-window.Nanoseconds()
}

// Memo remembers file digests by path and file identity (device, inode,
// size, mtime, ctime) across runs, so that hashing an unchanged file reads
// none of its bytes. It is safe for concurrent use; concurrent requests for
// the same file share one read.
type Memo struct {
	path string

	verify      atomic.Bool
	bytesHashed atomic.Int64
	hits        atomic.Int64
	misses      atomic.Int64

	mu       sync.Mutex
	entries  map[string]memoEntry // by absolute path
	touched  map[string]bool      // paths this process looked at; Save keeps our view of them
	changes  int64                // bumped on every change to entries
	saved    int64                // value of changes at the last Save
	inflight map[string]*hashCall

	progress atomic.Pointer[ProgressFunc]
}

// ProgressFunc receives the bytes read so far of one file being hashed.
type ProgressFunc func(path string, done, total int64)

// progressMinBytes keeps small files, which hash in a blink, from flashing
// bars: only files at least this big report progress.
const progressMinBytes = 64 << 20

// progressEvery bounds how often a big file reports, so the callback
// (terminal drawing) costs nothing next to the hashing.
const progressEvery = 16 << 20

// SetProgress makes the memo report the progress of every file of at
// least 64 MiB that it has to read; nil turns reporting off.
func (m *Memo) SetProgress(fn ProgressFunc) {
	if fn == nil {
		m.progress.Store(nil)
		return
	}
	m.progress.Store(&fn)
}

// progressReader counts bytes through to a ProgressFunc.
type progressReporter struct {
	path     string
	total    int64
	reported int64
	fn       ProgressFunc
}

// at reports every progressEvery bytes, and at the end.
func (p *progressReporter) at(done int64) {
	if done-p.reported >= progressEvery || (done >= p.total && p.reported < done) {
		p.reported = done
		p.fn(p.path, done, p.total)
	}
}

type hashCall struct {
	done   chan struct{}
	sum    string
	size   int64
	id     fileIdentity
	haveID bool
	err    error
}

// OpenMemo loads the memo stored at path. A missing or corrupt file gives an
// empty memo: the memo only saves work, so losing it costs a rehash, never a
// wrong digest. An empty path gives a memo that lives in memory only.
func OpenMemo(path string) (*Memo, error) {
	m := &Memo{
		path:     path,
		entries:  map[string]memoEntry{},
		touched:  map[string]bool{},
		inflight: map[string]*hashCall{},
	}
	if path == "" {
		return m, nil
	}
	entries, err := readMemoFile(path)
	if err != nil {
		return nil, err
	}
	m.entries = entries
	return m, nil
}

func readMemoFile(path string) (map[string]memoEntry, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]memoEntry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read digest memo %s: %w", path, err)
	}
	var mf memoFile
	if json.Unmarshal(data, &mf) != nil || mf.Version != memoVersion || mf.Entries == nil {
		return map[string]memoEntry{}, nil
	}
	for p, e := range mf.Entries {
		if !filepath.IsAbs(p) || !isSHA256Hex(e.SHA256) {
			delete(mf.Entries, p)
		}
	}
	return mf.Entries, nil
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// SetVerify makes every lookup ignore remembered digests and read the file
// again (the remembered digests are refreshed as a side effect).
func (m *Memo) SetVerify(v bool) {
	if m != nil {
		m.verify.Store(v)
	}
}

// BytesHashed is the number of file bytes read for hashing since OpenMemo.
func (m *Memo) BytesHashed() int64 {
	if m == nil {
		return 0
	}
	return m.bytesHashed.Load()
}

// Hits counts lookups answered without reading the file: a remembered
// digest, or a read that another goroutine was already doing.
func (m *Memo) Hits() int64 {
	if m == nil {
		return 0
	}
	return m.hits.Load()
}

// Misses counts lookups that read the file.
func (m *Memo) Misses() int64 {
	if m == nil {
		return 0
	}
	return m.misses.Load()
}

// File returns the digest of the file at path, reading it only when the
// memo has no digest for the file's current identity. FileDigest.Path is
// path as given, slash-separated. A nil *Memo hashes every time.
func (m *Memo) File(path string) (FileDigest, error) {
	var (
		sum  string
		size int64
		err  error
	)
	if m == nil {
		sum, size, err = File(path)
	} else {
		var abs string
		abs, err = filepath.Abs(path)
		if err != nil {
			return FileDigest{}, fmt.Errorf("hash %s: %w", path, err)
		}
		sum, size, err = m.digest(abs)
	}
	if err != nil {
		return FileDigest{}, err
	}
	return FileDigest{Path: filepath.ToSlash(path), SHA256: sum, Size: size}, nil
}

func (m *Memo) digest(abs string) (string, int64, error) {
	fi, err := os.Stat(abs)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", abs, err)
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("hash %s: not a regular file", abs)
	}
	id, haveID := identityOf(fi)

	m.mu.Lock()
	m.touched[abs] = true
	if e, ok := m.entries[abs]; ok && haveID && !m.verify.Load() && e.fileIdentity == id {
		m.mu.Unlock()
		m.hits.Add(1)
		return e.SHA256, e.Size, nil
	}
	if c, ok := m.inflight[abs]; ok {
		m.mu.Unlock()
		<-c.done
		// The shared result answers us only if the file we just stat'ed is
		// the one that was read.
		if c.err == nil && haveID && c.haveID && c.id == id {
			m.hits.Add(1)
			return c.sum, c.size, nil
		}
		c2 := m.hashAndRemember(abs)
		return c2.sum, c2.size, c2.err
	}
	c := &hashCall{done: make(chan struct{})}
	m.inflight[abs] = c
	m.mu.Unlock()

	res := m.hashAndRemember(abs)
	c.sum, c.size, c.id, c.haveID, c.err = res.sum, res.size, res.id, res.haveID, res.err
	m.mu.Lock()
	delete(m.inflight, abs)
	m.mu.Unlock()
	close(c.done)
	return c.sum, c.size, c.err
}

// hashAndRemember reads the file, checking through the open descriptor that
// it did not change while being read, and remembers the digest unless the
// file was modified too recently to be trusted later (see racy).
func (m *Memo) hashAndRemember(abs string) *hashCall {
	for range 3 {
		start := time.Now()
		// Swapped for a FIFO since the stat, the file is refused, not
		// waited on.
		f, before, err := boundedfile.Open(abs)
		if err != nil {
			return &hashCall{err: fmt.Errorf("hash %s: %w", abs, err)}
		}
		var progress func(int64)
		if fn := m.progress.Load(); fn != nil && before.Size() >= progressMinBytes {
			progress = (&progressReporter{path: abs, total: before.Size(), fn: *fn}).at
		}
		sum, n, err := hashOpenFile(f, before, progress)
		m.bytesHashed.Add(n)
		after, statErr := f.Stat()
		f.Close()
		if err == nil {
			err = statErr
		}
		if err != nil {
			return &hashCall{err: fmt.Errorf("hash %s: %w", abs, err)}
		}
		id, haveID := identityOf(before)
		idAfter, _ := identityOf(after)
		changed := n != before.Size() || idAfter != id ||
			after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime())
		if changed {
			continue
		}
		m.misses.Add(1)
		m.remember(abs, memoEntry{id, sum}, haveID && !racy(id, start))
		return &hashCall{sum: sum, size: n, id: id, haveID: haveID}
	}
	return &hashCall{err: fmt.Errorf("hash %s: the file kept changing while it was read; "+
		"wait for whatever writes it to finish, then run again", abs)}
}

func (m *Memo) remember(abs string, e memoEntry, trusted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.touched[abs] = true
	old, had := m.entries[abs]
	switch {
	case trusted && (!had || old != e):
		m.entries[abs] = e
		m.changes++
	case !trusted && had:
		delete(m.entries, abs)
		m.changes++
	}
}

// Save writes the memo back to its file if anything changed. The write is
// atomic (temp file, fsync, rename), so a reader or a concurrent Save in
// another process sees either the old file or a whole new one; entries that
// another process saved meanwhile survive for paths this one never looked
// at. Entries for files that no longer exist are dropped.
func (m *Memo) Save() error {
	if m == nil || m.path == "" {
		return nil
	}
	m.mu.Lock()
	if m.changes == m.saved {
		m.mu.Unlock()
		return nil
	}
	gen := m.changes
	entries := maps.Clone(m.entries)
	touched := maps.Clone(m.touched)
	m.mu.Unlock()

	disk, err := readMemoFile(m.path)
	if err != nil {
		return err
	}
	for p, e := range disk {
		if !touched[p] {
			entries[p] = e
		}
	}
	for p := range entries {
		if touched[p] {
			continue
		}
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			delete(entries, p)
		}
	}
	data, err := json.Marshal(memoFile{Version: memoVersion, Entries: entries})
	if err != nil {
		return fmt.Errorf("save digest memo %s: %w", m.path, err)
	}
	if err := atomicfile.Write(m.path, data, 0o644); err != nil {
		return fmt.Errorf("save digest memo: %w", err)
	}
	m.mu.Lock()
	m.saved = max(m.saved, gen)
	m.mu.Unlock()
	return nil
}
