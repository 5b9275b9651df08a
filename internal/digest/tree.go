package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// FileDigest is one file's sha256 and size. Path is slash-separated, and
// relative to the tree's root for files of a TreeDigest.
type FileDigest struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// TreeDigest describes a directory by its files, sorted by path. SHA256 is
// the sha256 of the canonical listing, one "path\x00sha256\x00size\n" record
// per file; paths cannot contain NUL, so the listing is unambiguous.
// Directories count only through the files in them: an empty directory does
// not change the digest.
type TreeDigest struct {
	SHA256 string       `json:"sha256"`
	Files  []FileDigest `json:"files"`
	Size   int64        `json:"size"`
}

// Tree digests every file under dir, hashing files in parallel. Symlinks
// are followed only to regular files inside dir; a link that leaves dir, a
// link to a directory, or anything that is neither a file nor a directory
// (socket, device, pipe) is an error rather than something quietly left out
// of the digest. A nil *Memo hashes every file.
func (m *Memo) Tree(dir string) (TreeDigest, error) {
	files, err := listTree(dir)
	if err != nil {
		return TreeDigest{}, err
	}
	digests := make([]FileDigest, len(files))
	errs := make([]error, len(files))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(files)) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return
				}
				d, err := m.File(files[i].abs)
				if err != nil {
					errs[i] = err
					failed.Store(true)
					return
				}
				d.Path = files[i].rel
				digests[i] = d
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return TreeDigest{}, fmt.Errorf("digest tree %s: %w", dir, err)
		}
	}
	return treeOf(digests), nil
}

// treeOf computes the tree digest of files already sorted by path.
func treeOf(files []FileDigest) TreeDigest {
	h := sha256.New()
	var total int64
	for _, f := range files {
		io.WriteString(h, f.Path+"\x00"+f.SHA256+"\x00"+strconv.FormatInt(f.Size, 10)+"\n")
		total += f.Size
	}
	if files == nil {
		files = []FileDigest{}
	}
	return TreeDigest{SHA256: hex.EncodeToString(h.Sum(nil)), Files: files, Size: total}
}

type treeFile struct {
	rel string // slash-separated, relative to the root
	abs string // where to read it: the file, or a symlink's target
}

func listTree(dir string) ([]treeFile, error) {
	// Resolve the root first so that "inside the tree" compares real paths
	// even when dir itself is reached through a symlink.
	root, err := filepath.Abs(dir)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return nil, fmt.Errorf("digest tree %s: %w", dir, err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("digest tree %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("digest tree %s: not a directory", dir)
	}

	var files []treeFile
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		t := d.Type()
		switch {
		case t.IsDir():
			return nil
		case t.IsRegular():
			files = append(files, treeFile{rel: rel, abs: p})
			return nil
		case t&fs.ModeSymlink != 0:
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				return fmt.Errorf("symlink %s cannot be followed: %w", rel, err)
			}
			if !within(root, target) {
				return fmt.Errorf("symlink %s points outside the directory (to %s); copy the file in instead of linking to it", rel, target)
			}
			ti, err := os.Stat(target)
			if err != nil {
				return fmt.Errorf("symlink %s: %w", rel, err)
			}
			if !ti.Mode().IsRegular() {
				return fmt.Errorf("symlink %s points to %s, which is not a regular file; only links to files are followed", rel, target)
			}
			files = append(files, treeFile{rel: rel, abs: target})
			return nil
		default:
			return fmt.Errorf("%s is a %s, which cannot be digested; remove it", rel, describeType(t))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("digest tree %s: %w", dir, err)
	}
	slices.SortFunc(files, func(a, b treeFile) int { return strings.Compare(a.rel, b.rel) })
	return files, nil
}

func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func describeType(t fs.FileMode) string {
	switch {
	case t&fs.ModeNamedPipe != 0:
		return "named pipe"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeDevice != 0:
		return "device"
	default:
		return "special file (" + t.String() + ")"
	}
}
