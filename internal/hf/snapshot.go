package hf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"sync"
)

// SnapshotOptions chooses files and says which risks the recipe accepts.
type SnapshotOptions struct {
	// AllowPatterns keeps only matching files (fnmatch, '*' crosses '/');
	// empty keeps all.
	AllowPatterns []string
	// IgnorePatterns drops matching files after AllowPatterns.
	IgnorePatterns []string
	// AllowPickle is the recipe's model.allow_pickle.
	AllowPickle bool
	// TrustRemoteCode is the recipe's model.trust_remote_code.
	TrustRemoteCode bool
}

// Snapshot is one downloaded revision of a repository.
type Snapshot struct {
	Repo   Repo   `json:"repo"`
	Commit string `json:"commit"`
	// Dir is snapshots/<commit> in the cache; its entries link to blobs.
	Dir   string `json:"dir"`
	Files []File `json:"files"`
	// Skipped lists pickle files left out because the repository also has
	// safetensors weights.
	Skipped []string `json:"skipped,omitempty"`
}

// File is one file of a snapshot.
type File struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// SHA256 is the verified digest of an LFS file, "" for small files (those
	// are verified by git blob sha1).
	SHA256 string `json:"sha256,omitempty"`
	// BlobPath is the file's content in the cache.
	BlobPath string `json:"blob_path"`
}

// session holds what one Snapshot call shares across its goroutines.
type session struct {
	c    *Client
	hc   *http.Client
	rc   repoCache
	repo Repo
	mu   sync.Mutex // serialises Progress and Logf calls
}

func (s *session) logf(format string, args ...any) {
	if s.c.Logf == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.Logf("%s", s.c.redact(fmt.Sprintf(format, args...)))
}

func (s *session) progress(file string, done, total int64) {
	if s.c.Progress == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.Progress(file, done, total)
}

// Snapshot resolves repo's revision to a commit, refuses what the options do
// not allow, and makes the selected files present and verified in the cache.
func (c *Client) Snapshot(ctx context.Context, repo Repo, opts SnapshotOptions) (*Snapshot, error) {
	if repo.Type == "" {
		repo.Type = TypeModel
	}
	if repo.Revision == "" {
		repo.Revision = DefaultRevision
	}
	if _, err := ParseURI(repo.String()); err != nil {
		return nil, err
	}
	if c.CacheDir == "" {
		return nil, errors.New("no Hugging Face cache directory: set HF_HUB_CACHE or HF_HOME")
	}
	s := &session{c: c, rc: c.repoCache(repo), repo: repo}
	var snap *Snapshot
	var err error
	if c.Offline {
		snap, err = s.offline(opts)
	} else {
		s.hc = c.httpClient()
		snap, err = s.online(ctx, opts)
	}
	if err != nil {
		return nil, c.redactErr(err)
	}
	return snap, nil
}

func (s *session) online(ctx context.Context, opts SnapshotOptions) (*Snapshot, error) {
	commit, paths, err := s.resolve(ctx)
	if err != nil {
		return nil, err
	}
	s.logf("%s is commit %s", s.repo, commit)
	selected, err := selectFiles(paths, opts.AllowPatterns, opts.IgnorePatterns)
	if err != nil {
		return nil, err
	}
	if len(selected) == 0 {
		return nil, fmt.Errorf("%s: no file matches the allow patterns %q (the repository has %d files)", s.repo, opts.AllowPatterns, len(paths))
	}
	keep, skipped, err := applyPickleRule(s.repo, selected, opts.AllowPickle)
	if err != nil {
		return nil, err
	}
	if err := refuseCodeFiles(s.repo, keep, opts.TrustRemoteCode); err != nil {
		return nil, err
	}
	if !opts.TrustRemoteCode {
		for _, name := range codeConfigs {
			if !slices.Contains(paths, name) {
				continue
			}
			files, err := s.fetch(ctx, commit, []string{name})
			if err != nil {
				return nil, err
			}
			if err := refuseAutoMap(s.repo, name, files[0].BlobPath); err != nil {
				return nil, err
			}
		}
	}
	files, err := s.fetch(ctx, commit, keep)
	if err != nil {
		return nil, err
	}
	if !isCommit(s.repo.Revision) {
		if err := s.rc.writeRef(s.repo.Revision, commit); err != nil {
			return nil, fmt.Errorf("%s: record refs/%s: %w", s.repo, s.repo.Revision, err)
		}
	}
	return &Snapshot{Repo: s.repo, Commit: commit, Dir: s.rc.snapshotDir(commit), Files: files, Skipped: skipped}, nil
}

// revisionInfo is the part of /api/models/{repo}/revision/{rev} used here.
type revisionInfo struct {
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
	} `json:"siblings"`
}

// resolve returns the commit of the revision and the repository's files.
func (s *session) resolve(ctx context.Context) (string, []string, error) {
	req, err := s.c.newRequest(ctx, http.MethodGet, "/api/"+s.repo.apiPath()+"/revision/"+url.PathEscape(s.repo.Revision))
	if err != nil {
		return "", nil, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return "", nil, fmt.Errorf("%s: cannot reach the Hub at %s (%w): check the network, or set HF_HUB_OFFLINE=1 to use the cache", s.repo, s.c.endpoint(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", nil, s.c.hubError(s.repo, "resolve revision", resp)
	}
	var info revisionInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return "", nil, fmt.Errorf("%s: the Hub's revision answer is not valid JSON: %w", s.repo, err)
	}
	var paths []string
	for _, sib := range info.Siblings {
		if err := validRepoPath(sib.RFilename); err != nil {
			return "", nil, fmt.Errorf("%s: %w", s.repo, err)
		}
		paths = append(paths, sib.RFilename)
	}
	if len(paths) == 0 {
		return "", nil, fmt.Errorf("%s: the repository has no files at this revision", s.repo)
	}
	sort.Strings(paths)
	commit := info.SHA
	if commit == "" {
		// Some mirrors leave sha out; every resolve answer carries it.
		_, commit, err = s.headFile(ctx, s.repo.Revision, paths[0])
		if err != nil {
			return "", nil, err
		}
	}
	if !isCommit(commit) {
		return "", nil, fmt.Errorf("%s: the Hub named commit %q, which is not a 40-character sha", s.repo, commit)
	}
	return commit, paths, nil
}

// fetch makes files of commit present in the cache: entries already in the
// snapshot cost nothing, the rest are looked up, downloaded once per blob,
// then linked. Files come back in the order of paths.
func (s *session) fetch(ctx context.Context, commit string, paths []string) ([]File, error) {
	files := make([]File, len(paths))
	var missing []int
	for i, p := range paths {
		f, ok, err := s.rc.cachedFile(commit, p)
		if err != nil {
			return nil, err
		}
		if ok {
			files[i] = f
		} else {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return files, nil
	}

	remote := make([]remoteFile, len(missing))
	err := forEach(ctx, s.c.parallel(), len(missing), func(ctx context.Context, k int) error {
		rf, got, err := s.headFile(ctx, commit, paths[missing[k]])
		if err != nil {
			return err
		}
		if got != commit {
			return fmt.Errorf("%s: asked for %s at commit %s, the Hub answered for commit %s", s.repo, rf.Path, commit, got)
		}
		remote[k] = rf
		return nil
	})
	if err != nil {
		return nil, err
	}

	// Identical files share one blob; fetch each blob once.
	var blobs []remoteFile
	seen := map[string]bool{}
	for _, rf := range remote {
		if !seen[rf.Etag] {
			seen[rf.Etag] = true
			blobs = append(blobs, rf)
		}
	}
	err = forEach(ctx, s.c.parallel(), len(blobs), func(ctx context.Context, k int) error {
		if err := s.fetchBlob(ctx, commit, blobs[k]); err != nil {
			return fmt.Errorf("%s: download %s: %w", s.repo, blobs[k].Path, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	for k, i := range missing {
		rf := remote[k]
		if err := s.rc.link(commit, rf.Path, rf.Etag); err != nil {
			return nil, fmt.Errorf("%s: link %s into the snapshot: %w", s.repo, rf.Path, err)
		}
		fi, err := os.Stat(s.rc.blobPath(rf.Etag))
		if err != nil {
			return nil, err
		}
		files[i] = File{Path: rf.Path, Size: fi.Size(), BlobPath: s.rc.blobPath(rf.Etag)}
		if rf.LFS {
			files[i].SHA256 = rf.Etag
		}
	}
	return files, nil
}

// offline answers from refs/ and snapshots/ alone.
func (s *session) offline(opts SnapshotOptions) (*Snapshot, error) {
	notCached := func(detail string) error {
		return fmt.Errorf("%s is not in the Hugging Face cache at %s (%s) and HF_HUB_OFFLINE is set: "+
			"run once with network access (unset HF_HUB_OFFLINE) to download it", s.repo, s.c.CacheDir, detail)
	}
	commit := s.repo.Revision
	if !isCommit(commit) {
		var err error
		commit, err = s.rc.readRef(s.repo.Revision)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, notCached("no refs/" + s.repo.Revision)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.repo, err)
		}
	}
	cached, err := s.rc.listSnapshot(commit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notCached("no snapshot of commit " + commit)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.repo, err)
	}
	byPath := map[string]File{}
	var paths []string
	for _, f := range cached {
		byPath[f.Path] = f
		paths = append(paths, f.Path)
	}
	selected, err := selectFiles(paths, opts.AllowPatterns, opts.IgnorePatterns)
	if err != nil {
		return nil, err
	}
	if len(selected) == 0 {
		return nil, notCached(fmt.Sprintf("no cached file matches %q", opts.AllowPatterns))
	}
	keep, skipped, err := applyPickleRule(s.repo, selected, opts.AllowPickle)
	if err != nil {
		return nil, err
	}
	if err := refuseCodeFiles(s.repo, keep, opts.TrustRemoteCode); err != nil {
		return nil, err
	}
	if !opts.TrustRemoteCode {
		for _, name := range codeConfigs {
			if f, ok := byPath[name]; ok {
				if err := refuseAutoMap(s.repo, name, f.BlobPath); err != nil {
					return nil, err
				}
			}
		}
	}
	snap := &Snapshot{Repo: s.repo, Commit: commit, Dir: s.rc.snapshotDir(commit), Skipped: skipped}
	for _, p := range keep {
		snap.Files = append(snap.Files, byPath[p])
	}
	return snap, nil
}

// forEach runs fn for 0..n-1 with at most limit at once and returns the first
// error, cancelling the others.
func forEach(ctx context.Context, limit, n int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	sem := make(chan struct{}, limit)
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// String is a one-line summary for logs.
func (s *Snapshot) String() string {
	return fmt.Sprintf("%s (commit %s, %d files in %s)", s.Repo, s.Commit, len(s.Files), s.Dir)
}
