package hf

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// remoteFile is what a HEAD on resolve/<commit>/<path> says about a file.
type remoteFile struct {
	Path string
	// Etag names the blob: the sha256 of an LFS file, the git blob sha1 of a
	// small one.
	Etag string
	// LFS is true when Etag came from X-Linked-Etag and is the sha256.
	LFS bool
	// Size is -1 when the Hub did not say.
	Size int64
}

// headFile reads a file's metadata without following the redirect to the CDN
// (the Hub's own headers are on the redirect), but following relative
// redirects, which the Hub uses for renamed repositories.
func (s *session) headFile(ctx context.Context, revision, file string) (remoteFile, string, error) {
	noFollow := *s.hc
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := s.c.newRequest(ctx, http.MethodHead, s.repo.resolvePath(revision, file))
	if err != nil {
		return remoteFile{}, "", err
	}
	for hops := 0; ; hops++ {
		resp, err := noFollow.Do(req)
		if err != nil {
			return remoteFile{}, "", retryable{err}
		}
		_ = resp.Body.Close()
		if loc := resp.Header.Get("Location"); isRedirect(resp.StatusCode) && loc != "" && hops < 5 {
			next, err := req.URL.Parse(loc)
			if err == nil && next.Host == req.URL.Host {
				req = req.Clone(ctx)
				req.URL = next
				req.Host = ""
				continue
			}
		}
		if resp.StatusCode >= 400 {
			err := s.c.hubError(s.repo, "look up "+file, resp)
			if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
				err = retryable{err}
			}
			return remoteFile{}, "", err
		}
		return parseFileHeaders(s.repo, file, resp)
	}
}

func isRedirect(code int) bool { return code >= 300 && code < 400 }

func parseFileHeaders(repo Repo, file string, resp *http.Response) (remoteFile, string, error) {
	commit := resp.Header.Get("X-Repo-Commit")
	if commit == "" {
		return remoteFile{}, "", fmt.Errorf("%s: the answer for %s lacks the X-Repo-Commit header, so it does not come from a Hugging Face Hub: check HF_ENDPOINT and any proxy", repo, file)
	}
	rf := remoteFile{Path: file, Size: -1}
	if linked := normalizeEtag(resp.Header.Get("X-Linked-Etag")); linked != "" {
		rf.Etag, rf.LFS = linked, true
		if !sha256Re.MatchString(rf.Etag) {
			return remoteFile{}, "", fmt.Errorf("%s: X-Linked-Etag %q of %s is not a sha256", repo, rf.Etag, file)
		}
	} else {
		rf.Etag = normalizeEtag(resp.Header.Get("ETag"))
		if !commitRe.MatchString(rf.Etag) {
			return remoteFile{}, "", fmt.Errorf("%s: ETag %q of %s is not a git blob sha1, so it cannot be verified or cached", repo, rf.Etag, file)
		}
	}
	size := resp.Header.Get("X-Linked-Size")
	if size == "" && !isRedirect(resp.StatusCode) {
		size = resp.Header.Get("Content-Length")
	}
	if n, err := strconv.ParseInt(size, 10, 64); err == nil && n >= 0 {
		rf.Size = n
	}
	return rf, commit, nil
}

// normalizeEtag strips the weak prefix and quotes, as huggingface_hub does.
func normalizeEtag(s string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(s), "W/"), `"`)
}

// retryable marks errors where trying again (resuming) may succeed.
type retryable struct{ err error }

func (r retryable) Error() string   { return r.err.Error() }
func (r retryable) Unwrap() error   { return r.err }
func (r retryable) Transient() bool { return true }

// verifyError is a finished download whose bytes do not match their digest.
type verifyError struct {
	msg string
	// resumed is true when part of the bytes came from an earlier attempt,
	// which may be what is wrong.
	resumed bool
}

func (v *verifyError) Error() string { return v.msg }

// fetchBlob makes blobs/<etag> exist and hold verified bytes. Concurrent
// fetches of one blob, from edgepipe or huggingface_hub, serialise on the
// lock file; a partial download left in <etag>.incomplete is resumed.
func (s *session) fetchBlob(ctx context.Context, commit string, rf remoteFile) error {
	blob := s.rc.blobPath(rf.Etag)
	if _, err := os.Stat(blob); err == nil {
		return nil
	}
	unlock, err := lockFile(ctx, s.rc.lockPath(rf.Etag))
	if err != nil {
		return fmt.Errorf("lock %s: %w", s.rc.lockPath(rf.Etag), err)
	}
	defer unlock()
	if _, err := os.Stat(blob); err == nil {
		return nil
	}
	if err := os.MkdirAll(s.rc.blobsDir(), 0o755); err != nil {
		return err
	}
	incomplete := blob + ".incomplete"
	const maxAttempts = 4
	freshRetry := false
	for attempt := 1; ; attempt++ {
		err := s.download(ctx, commit, rf, incomplete)
		if err == nil {
			if err := os.Chmod(incomplete, 0o644); err != nil {
				return err
			}
			return os.Rename(incomplete, blob)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var verr *verifyError
		if errors.As(err, &verr) {
			// Never keep bytes that failed verification. If part of them came
			// from an earlier attempt, start over once from zero.
			_ = os.Remove(incomplete)
			if verr.resumed && !freshRetry {
				freshRetry = true
				s.logf("%s: %s failed verification after resuming; downloading it again from the start", s.repo, rf.Path)
				continue
			}
			return err
		}
		var rerr retryable
		if errors.As(err, &rerr) && attempt < maxAttempts {
			s.logf("%s: %s: %v; retrying (attempt %d of %d)", s.repo, rf.Path, err, attempt+1, maxAttempts)
			// A dropped connection is resumed at once; a struggling server
			// gets a growing pause.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt-1) * time.Second):
			}
			continue
		}
		return err
	}
}

// download appends the missing bytes of rf to the incomplete file and
// verifies the whole file.
func (s *session) download(ctx context.Context, commit string, rf remoteFile, incomplete string) error {
	f, err := os.OpenFile(incomplete, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()

	// The sha256 of an LFS file is computed while streaming; resuming means
	// hashing the bytes already on disk first.
	// (Small files are checked by git blob sha1 afterwards, which needs the
	// final size up front; their running sha256 is simply unused.)
	sum := sha256.New()
	offset, err := io.Copy(sum, f)
	if err != nil {
		return fmt.Errorf("read %s: %w", incomplete, err)
	}
	if rf.Size >= 0 && offset > rf.Size {
		if offset, err = restart(f, sum); err != nil {
			return err
		}
	}
	resumedFrom := offset

	if rf.Size < 0 || offset < rf.Size {
		var fromScratch bool
		offset, fromScratch, err = s.fetchRest(ctx, commit, rf, f, sum, offset)
		if err != nil {
			return err
		}
		if fromScratch {
			resumedFrom = 0
		}
	}

	if rf.Size >= 0 && offset != rf.Size {
		return &verifyError{msg: fmt.Sprintf("%s: %s has %d bytes, the Hub said %d", s.repo, rf.Path, offset, rf.Size), resumed: resumedFrom > 0}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	var got string
	if rf.LFS {
		got = hex.EncodeToString(sum.Sum(nil))
	} else {
		if got, err = gitBlobSHA1(f, offset); err != nil {
			return err
		}
	}
	if got != rf.Etag {
		kind := "sha256"
		if !rf.LFS {
			kind = "git blob sha1"
		}
		return &verifyError{
			msg:     fmt.Sprintf("%s: %s is corrupt: its %s is %s, the Hub says %s; the partial file was deleted, run again to download it afresh", s.repo, rf.Path, kind, got, rf.Etag),
			resumed: resumedFrom > 0,
		}
	}
	return nil
}

// fetchRest downloads the bytes of rf past offset into f (and sum),
// resuming with a Range request when there are some already; a server
// that cannot resume sends it all again (fromScratch). It returns the
// file's new size.
func (s *session) fetchRest(ctx context.Context, commit string, rf remoteFile, f *os.File, sum hash.Hash, offset int64) (int64, bool, error) {
	req, err := s.c.newRequest(ctx, http.MethodGet, s.repo.resolvePath(commit, rf.Path))
	if err != nil {
		return offset, false, err
	}
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
		// Without If-Range a server whose file changed would append new
		// bytes to old ones; with it, it sends the whole file instead.
		req.Header.Set("If-Range", `"`+rf.Etag+`"`)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return offset, false, retryable{err}
	}
	defer resp.Body.Close()
	fromScratch := false
	switch {
	case resp.StatusCode == http.StatusPartialContent && offset > 0:
		if start, ok := contentRangeStart(resp.Header.Get("Content-Range")); !ok || start != offset {
			if _, err := restart(f, sum); err != nil {
				return offset, false, err
			}
			return offset, false, retryable{fmt.Errorf("server answered bytes from %q instead of %d", resp.Header.Get("Content-Range"), offset)}
		}
		s.logf("%s: resuming %s at byte %d", s.repo, rf.Path, offset)
	case resp.StatusCode == http.StatusOK:
		if offset > 0 {
			s.logf("%s: server sent all of %s instead of the missing range; starting it over", s.repo, rf.Path)
			if offset, err = restart(f, sum); err != nil {
				return offset, false, err
			}
			fromScratch = true
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		if _, err := restart(f, sum); err != nil {
			return offset, false, err
		}
		return 0, false, retryable{fmt.Errorf("server refused to resume %s", rf.Path)}
	default:
		err := s.c.hubError(s.repo, "download "+rf.Path, resp)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			err = retryable{err}
		}
		return offset, false, err
	}
	body := io.Reader(resp.Body)
	if rf.Size >= 0 {
		// One byte more than expected is enough to tell the file is too long.
		body = io.LimitReader(body, rf.Size-offset+1)
	}
	pw := &progressWriter{s: s, file: rf.Path, done: offset, total: rf.Size}
	if _, err := copyBody(io.MultiWriter(f, sum, pw), body); err != nil {
		return offset, false, err
	}
	return pw.done, fromScratch, nil
}

// restart empties the incomplete file and the running hash.
func restart(f *os.File, sum hash.Hash) (int64, error) {
	if err := f.Truncate(0); err != nil {
		return 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	sum.Reset()
	return 0, nil
}

// copyBody copies and marks read (network) errors as retryable, write (disk)
// errors as not.
func copyBody(dst io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		nr, rerr := src.Read(buf)
		if nr > 0 {
			nw, werr := dst.Write(buf[:nr])
			n += int64(nw)
			if werr != nil {
				return n, werr
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, retryable{rerr}
		}
	}
}

func contentRangeStart(h string) (int64, bool) {
	// "bytes 100-199/200"
	rest, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return 0, false
	}
	start, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(start, 10, 64)
	return n, err == nil
}

// gitBlobSHA1 is git's object id of a file: sha1("blob <size>\x00" + bytes).
func gitBlobSHA1(f *os.File, size int64) (string, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", size)
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

type progressWriter struct {
	s           *session
	file        string
	done, total int64
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	p.s.progress(p.file, p.done, p.total)
	return len(b), nil
}
