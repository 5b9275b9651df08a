package remotecache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/provenance"
)

// download streams one object into dst, hashing it on the way; a size or
// digest that differs from the record's is an error and dst is removed.
// No more than the record's size is ever written: a longer object is
// caught by reading one byte past it, which is not kept.
func (s *Store) download(ctx context.Context, f fileDigest, dst string) error {
	o, err := s.get(ctx, casName(f.SHA256), f.Size)
	if errors.Is(err, errNotFound) {
		return fmt.Errorf("%s: its object %s is missing", f.Path, f.SHA256[:16])
	}
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	defer o.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := copyAtMost(io.MultiWriter(out, h), o, f.Size)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	s.Stats.BytesDown.Add(n)
	if err != nil {
		os.Remove(dst)
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if n > f.Size {
		os.Remove(dst)
		return fmt.Errorf("%s: its object is corrupt (longer than the %d bytes the record says)", f.Path, f.Size)
	}
	if n != f.Size || got != f.SHA256 {
		os.Remove(dst)
		return fmt.Errorf("%s: its object is corrupt (%d bytes with sha256 %s; the record says %d bytes, %s)", f.Path, n, got[:16], f.Size, f.SHA256[:16])
	}
	s.Stats.ObjectsDown.Add(1)
	return nil
}

// copyAtMost copies src to dst up to size bytes and never writes more;
// it then reads one byte more, which it does not write, so that n past
// size tells a longer src from one of exactly size bytes.
func copyAtMost(dst io.Writer, src io.Reader, size int64) (n int64, err error) {
	n, err = io.Copy(dst, io.LimitReader(src, size))
	if err != nil || n < size {
		return n, err
	}
	var extra [1]byte
	m, err := io.ReadFull(src, extra[:])
	if err == io.EOF {
		err = nil
	}
	return n + int64(m), err
}

// Has reports whether the remote holds a record for key.
func (s *Store) Has(ctx context.Context, key string) (bool, error) {
	return s.exists(ctx, recordName(key), -1)
}

// Upload shares a local entry: every object first, then the record, only
// if no record exists. Files are opened without following links and must
// be regular files inside the entry's folder with the size the record
// says; with verify set, each is rehashed first (an entry found in the
// local cache rather than just written), so a corrupt local copy is never
// published. Skipped when the mode does not write.
func (s *Store) Upload(ctx context.Context, ent *cache.Entry, verify bool) error {
	if !s.opt.Mode.Writes() {
		return nil
	}
	if s.down() {
		// Said once already, when the store went down.
		return quietError{fmt.Errorf("remote cache %s: %w", s.be, errDown)}
	}
	ok, err := s.Has(ctx, ent.Key)
	if unanswered(err) {
		// The server did not answer: the objects would not fare better.
		return fmt.Errorf("remote cache %s: %w", s.be, err)
	}
	if err == nil && ok {
		s.Stats.EntriesKnown.Add(1)
		return nil
	}
	for _, f := range ent.Tree.Files {
		if err := s.uploadFile(ctx, ent, f, verify); err != nil {
			return fmt.Errorf("remote cache %s: upload %s of step %s: %w", s.be, f.Path, ent.StepID, err)
		}
	}
	rec := Record{Key: ent.Key, Kind: ent.Kind, StepID: ent.StepID, Tree: ent.Tree, Created: ent.Created,
		Duration: ent.Duration, Tools: ent.Tools, Writer: s.opt.Version}
	payload, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	env := &provenance.Envelope{Payload: payload, PayloadType: RecordType, Signatures: []provenance.Signature{}}
	if s.opt.Signer != nil {
		if env, err = s.opt.Signer.Sign(RecordType, payload); err != nil {
			return fmt.Errorf("sign the record of %s: %w", ent.StepID, err)
		}
	}
	raw, err := json.Marshal(env)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	err = s.put(ctx, recordName(ent.Key), bytes.NewReader(raw), int64(len(raw)), hex.EncodeToString(sum[:]), true)
	switch {
	case errors.Is(err, errExists):
		s.Stats.RecordsLostRace.Add(1)
	case err != nil:
		return fmt.Errorf("remote cache %s: write the record of step %s: %w", s.be, ent.StepID, err)
	default:
		s.Stats.RecordsUp.Add(1)
	}
	return nil
}

func (s *Store) uploadFile(ctx context.Context, ent *cache.Entry, f fileDigest, verify bool) error {
	ok, err := s.exists(ctx, casName(f.SHA256), f.Size)
	if err == nil && ok {
		s.Stats.ObjectsSkipped.Add(1)
		return nil
	}
	if unanswered(err) {
		return err
	}
	if !filepath.IsLocal(filepath.FromSlash(f.Path)) {
		return fmt.Errorf("the path leaves the entry's folder")
	}
	p := filepath.Join(ent.Dir, filepath.FromSlash(f.Path))
	// No link is followed, at the file or anywhere above it in the entry.
	if err := noLinks(ent.Dir, f.Path); err != nil {
		return err
	}
	fh, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Size() != f.Size {
		return fmt.Errorf("is not the regular file of %d bytes the local record lists", f.Size)
	}
	if verify {
		h := sha256.New()
		if _, err := io.Copy(h, fh); err != nil {
			return err
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
			return &cache.CorruptError{Key: ent.Key, StepID: ent.StepID, Path: f.Path, Problem: cache.Mismatch(f.SHA256, got)}
		}
		if _, err := fh.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	if err := s.put(ctx, casName(f.SHA256), fh, f.Size, f.SHA256, false); err != nil {
		return err
	}
	s.Stats.BytesUp.Add(f.Size)
	s.Stats.ObjectsUp.Add(1)
	return nil
}

// noLinks refuses a path inside root any of whose parts is a symlink.
func noLinks(root, rel string) error {
	cur := root
	for _, part := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symlink; the remote cache uploads only regular files inside the cache", cur)
		}
	}
	return nil
}

func readAll(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// PutBlob uploads one file to the content-addressed store (a bundle's
// file too large to embed) and returns its digest. It needs a writing mode.
func (s *Store) PutBlob(ctx context.Context, path string) (fileDigest, error) {
	if !s.opt.Mode.Writes() {
		return fileDigest{}, fmt.Errorf("remote cache %s is read-only here (--remote-cache-mode %s): %s cannot be shared", s.be, s.opt.Mode, path)
	}
	sum, size, err := digest.File(path)
	if err != nil {
		return fileDigest{}, err
	}
	fd := fileDigest{Path: path, SHA256: sum, Size: size}
	if ok, err := s.exists(ctx, casName(fd.SHA256), fd.Size); err == nil && ok {
		return fd, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fileDigest{}, err
	}
	defer f.Close()
	if err := s.put(ctx, casName(fd.SHA256), f, fd.Size, fd.SHA256, false); err != nil {
		return fileDigest{}, fmt.Errorf("remote cache %s: upload %s: %w", s.be, path, err)
	}
	s.Stats.BytesUp.Add(fd.Size)
	s.Stats.ObjectsUp.Add(1)
	return fd, nil
}

// GetBlob downloads one object of the content-addressed store to dst,
// digest-checked.
func (s *Store) GetBlob(ctx context.Context, f fileDigest, dst string) error {
	if !isHex64(f.SHA256) {
		return fmt.Errorf("bad digest %q", f.SHA256)
	}
	if f.Size < 0 {
		return fmt.Errorf("bad size %d", f.Size)
	}
	if err := fits(filepath.Dir(dst), f.Size); err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	return s.download(ctx, f, dst)
}

// quietError is an error the run has reported already: a caller that
// may go on without the remote cache need not say it again.
type quietError struct{ error }

func (quietError) Quiet() bool     { return true }
func (e quietError) Unwrap() error { return e.error }

// fits refuses a download of size bytes into dir's file system when it
// has less room than that: a record's sizes are the writer's claim, and
// the bytes land before their digests can be checked.
func fits(dir string, size int64) error {
	free, known, err := freeBytes(dir)
	if err != nil {
		return fmt.Errorf("check the free space in %s: %w", dir, err)
	}
	if known && size > free {
		return fmt.Errorf("its files add up to %d bytes (%.1f GiB), more than the %d bytes (%.1f GiB) free in the file system of the cache at %s: free some space (`edgepipe cache gc`), or put the cache on a larger disk (EDGEPIPE_CACHE)",
			size, float64(size)/(1<<30), free, float64(free)/(1<<30), dir)
	}
	return nil
}

// unanswered reports an error of a server that did not answer (or of a
// store the breaker took out): the next request would not fare better.
// Any other error (a refusal) may be particular to one request.
func unanswered(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, errDown)
}
