package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// CheckRelPath accepts only paths that stay inside the artifact folder on
// every OS, so a hostile manifest (or pulled artifact) cannot make edgepipe
// read or write outside it.
func CheckRelPath(p string) error {
	if p == "." || !fs.ValidPath(p) || strings.Contains(p, `\`) {
		return fmt.Errorf("path %q is not a relative, slash-separated path inside the folder", p)
	}
	return nil
}

// entry is one non-directory found in an artifact folder.
type entry struct {
	rel  string // slash-separated, relative to the folder
	abs  string
	mode fs.FileMode
	size int64
}

// walk lists every non-directory under dir except the manifest itself and
// its sidecars, sorted by path, and the directories (dir included) for
// syncing.
func walk(ctx context.Context, dir string) (entries []entry, dirs []string, err error) {
	err = filepath.WalkDir(dir, func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, abs)
			return nil
		}
		rel, err := filepath.Rel(dir, abs)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == FileName || IsSidecar(rel) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		entries = append(entries, entry{rel: rel, abs: abs, mode: info.Mode(), size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].rel < entries[j].rel })
	return entries, dirs, nil
}

// hashFile returns the sha256 (lowercase hex) and size of the file at path.
// With durable set it also fsyncs the file, so that a rename published after
// it can never expose a file whose bytes are not on disk yet.
func hashFile(ctx context.Context, path string, durable bool) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, ctxReader{ctx, f}, make([]byte, 1<<20))
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", path, err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			return "", 0, fmt.Errorf("sync %s: %w", path, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// ctxReader stops a long hash as soon as the context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// syncDir makes renames and creations inside dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

func describe(sha string, size int64) string {
	return fmt.Sprintf("sha256 %s, %d bytes", sha, size)
}
