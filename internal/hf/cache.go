package hf

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
)

// repoCache is one repository's folder in the huggingface_hub cache:
//
//	{cache}/models--org--name/blobs/<etag>
//	{cache}/models--org--name/snapshots/<commit>/<path> -> ../../blobs/<etag>
//	{cache}/models--org--name/refs/<revision>            (the commit, no newline)
//	{cache}/.locks/models--org--name/<etag>.lock
type repoCache struct {
	root  string
	locks string
}

func (c *Client) repoCache(repo Repo) repoCache {
	return repoCache{
		root:  filepath.Join(c.CacheDir, repo.folderName()),
		locks: filepath.Join(c.CacheDir, ".locks", repo.folderName()),
	}
}

func (rc repoCache) blobsDir() string            { return filepath.Join(rc.root, "blobs") }
func (rc repoCache) blobPath(etag string) string { return filepath.Join(rc.root, "blobs", etag) }
func (rc repoCache) lockPath(etag string) string { return filepath.Join(rc.locks, etag+".lock") }
func (rc repoCache) snapshotDir(commit string) string {
	return filepath.Join(rc.root, "snapshots", commit)
}
func (rc repoCache) pointerPath(commit, file string) string {
	return filepath.Join(rc.snapshotDir(commit), filepath.FromSlash(file))
}

// readRef returns the commit a branch or tag pointed to when last downloaded.
func (rc repoCache) readRef(revision string) (string, error) {
	b, err := os.ReadFile(filepath.Join(rc.root, "refs", filepath.FromSlash(revision)))
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(string(b))
	if !isCommit(commit) {
		return "", fmt.Errorf("refs/%s holds %q, not a commit sha", revision, commit)
	}
	return commit, nil
}

// writeRef records revision -> commit. huggingface_hub reads the file without
// stripping, so it must hold exactly the sha with no newline.
func (rc repoCache) writeRef(revision, commit string) error {
	path := filepath.Join(rc.root, "refs", filepath.FromSlash(revision))
	if cur, err := os.ReadFile(path); err == nil && string(cur) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return writeFileAtomic(path, []byte(commit))
}

// link points snapshots/<commit>/<file> at blobs/<etag> with a relative
// symlink, so the cache survives being moved, replacing any older entry
// atomically.
func (rc repoCache) link(commit, file, etag string) error {
	pointer := rc.pointerPath(commit, file)
	if err := os.MkdirAll(filepath.Dir(pointer), 0o755); err != nil {
		return err
	}
	target, err := filepath.Rel(filepath.Dir(pointer), rc.blobPath(etag))
	if err != nil {
		return err
	}
	if cur, err := os.Readlink(pointer); err == nil && cur == target {
		return nil
	}
	tmp := pointer + ".tmp-" + randomSuffix()
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, pointer); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// cachedFile describes snapshots/<commit>/<file> if it is present and its
// blob exists. A commit's content never changes, so a present entry needs no
// request to the Hub.
func (rc repoCache) cachedFile(commit, file string) (File, bool, error) {
	pointer := rc.pointerPath(commit, file)
	fi, err := os.Lstat(pointer)
	if errors.Is(err, fs.ErrNotExist) {
		return File{}, false, nil
	}
	if err != nil {
		return File{}, false, err
	}
	if fi.Mode().IsRegular() {
		// huggingface_hub copies instead of linking where symlinks are not
		// supported; such an entry has no blob name to take a digest from.
		return File{Path: file, Size: fi.Size(), BlobPath: pointer}, true, nil
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return File{}, false, fmt.Errorf("cache entry %s is neither a file nor a symlink", pointer)
	}
	target, err := os.Readlink(pointer)
	if err != nil {
		return File{}, false, err
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(pointer), target)
	}
	target = filepath.Clean(target)
	if filepath.Dir(target) != rc.blobsDir() {
		return File{}, false, fmt.Errorf("cache entry %s points outside the repository's blobs (%s)", pointer, target)
	}
	bi, err := os.Stat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return File{}, false, nil
	}
	if err != nil {
		return File{}, false, err
	}
	f := File{Path: file, Size: bi.Size(), BlobPath: target}
	if etag := filepath.Base(target); sha256Re.MatchString(etag) {
		f.SHA256 = etag
	}
	return f, true, nil
}

// listSnapshot returns every file of a cached snapshot, sorted by path.
func (rc repoCache) listSnapshot(commit string) ([]File, error) {
	dir := rc.snapshotDir(commit)
	var files []File
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		f, ok, err := rc.cachedFile(commit, rel)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("cache entry %s points to a missing blob: download it again with network access", path)
		}
		files = append(files, f)
		return nil
	})
	return files, err
}

// writeFileAtomic writes a ref or pointer whole (fsynced, renamed into
// place), as huggingface_hub readers expect to find it.
func writeFileAtomic(path string, data []byte) error { return atomicfile.Write(path, data, 0o644) }

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// validRepoPath refuses file names from the Hub that could escape the
// snapshot directory or that the cache cannot represent.
func validRepoPath(p string) error {
	if p == "" || len(p) > 1024 || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return fmt.Errorf("the Hub listed an unsafe file name %q", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("the Hub listed an unsafe file name %q", p)
		}
	}
	return nil
}
