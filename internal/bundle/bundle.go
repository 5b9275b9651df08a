// Package bundle packs a saved plan with everything its steps read from
// the planning machine's disk, so that `edgepipe step run BUNDLE STEP`
// runs a step on any machine: no path of the machine that planned is
// needed there.
//
// A bundle is a tar (written by `edgepipe plan --bundle FILE`):
//
//	plan.json         the saved plan; its recipe path is relative to the bundle
//	bundle.json       format version, and the files shipped by digest only
//	files/...         the recipe, its lock, its local data files and a local
//	                  model folder, at their paths relative to the folder
//	                  that holds them all
//
// A file larger than the embedding limit is not copied into the tar: it is
// uploaded to the remote cache's content-addressed store and listed in
// bundle.json by path, sha256 and size; extraction downloads it and checks
// its digest. Extraction trusts nothing in the tar: only regular files and
// folders at clean relative paths, each created fresh, within a size
// budget.
package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/lockfile"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/steps"
)

// Format is bundle.json's format version.
const Format = 1

// DefaultEmbedLimit is the largest file copied into a bundle; larger ones
// travel through the remote cache by digest.
const DefaultEmbedLimit = 64 << 20

// maxExtract bounds what one bundle may unpack (embedded files).
const maxExtract = 16 << 30

// Blobs is the content-addressed store of the remote cache.
type Blobs interface {
	PutBlob(ctx context.Context, path string) (digest.FileDigest, error)
	GetBlob(ctx context.Context, f digest.FileDigest, dst string) error
}

// Manifest is bundle.json.
type Manifest struct {
	Format int `json:"format"`
	// Remote lists files shipped by digest: Path is relative to files/.
	Remote []digest.FileDigest `json:"remote,omitempty"`
}

// LocalFiles lists the files on this machine the plan's steps read: the
// local data files and a local model folder's files (absolute paths). A
// path the recipe gives as absolute is refused: it would name a file of
// this machine on every other.
func LocalFiles(pl *plan.Plan, data func(ref string) (string, error)) ([]string, error) {
	dir := pl.Recipe.Dir()
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, s := range pl.Steps {
		for _, role := range slices.Sorted(mapKeys(s.Data)) {
			ref := s.Data[role]
			if strings.HasPrefix(ref, "builtin:") {
				continue
			}
			if filepath.IsAbs(ref) {
				return nil, fmt.Errorf("step %s reads %s data from the absolute path %s: a bundle runs on other machines; give the path relative to the recipe", s.ID, role, ref)
			}
			p, err := data(ref)
			if err != nil {
				return nil, err
			}
			add(p)
		}
		k, ok := steps.Lookup(s.Kind)
		if !ok {
			continue
		}
		ext, ok := k.(steps.External)
		if !ok {
			continue
		}
		d, ok, err := ext.ExternalDir(s.Params, dir)
		if err != nil || !ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		if src := pl.Recipe.Model.Source; filepath.IsAbs(src) {
			return nil, fmt.Errorf("the model source %s is an absolute path: a bundle runs on other machines; give it relative to the recipe", src)
		}
		err = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			if !e.Type().IsRegular() {
				return fmt.Errorf("%s is not a regular file: a bundle ships only regular files", p)
			}
			add(p)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Write writes a bundle to out (atomically) holding sv, the recipe at
// recipePath, its lock when there is one, and files. Files over
// embedLimit go to blobs; with blobs nil they are an error.
func Write(ctx context.Context, out string, sv *plan.Saved, recipePath string, files []string, blobs Blobs, embedLimit int64) error {
	recipeAbs, err := filepath.Abs(recipePath)
	if err != nil {
		return err
	}
	all := []string{recipeAbs}
	if lock := lockfile.PathFor(recipeAbs); fileExists(lock) {
		all = append(all, lock)
	}
	all = append(all, files...)
	root := filepath.Dir(recipeAbs)
	for _, f := range all {
		root = commonDir(root, filepath.Dir(f))
	}
	rel := func(p string) string {
		r, _ := filepath.Rel(root, p)
		return filepath.ToSlash(r)
	}
	saved := *sv
	saved.Recipe = "files/" + rel(recipeAbs)
	man := Manifest{Format: Format}
	var embed []string
	for _, f := range all {
		st, err := os.Stat(f)
		if err != nil {
			return err
		}
		if st.Size() <= embedLimit {
			embed = append(embed, f)
			continue
		}
		if blobs == nil {
			return fmt.Errorf("%s is %d MiB, over the %d MiB a bundle embeds: give --remote-cache (mode write or readwrite) so it travels by digest", f, st.Size()>>20, embedLimit>>20)
		}
		fd, err := blobs.PutBlob(ctx, f)
		if err != nil {
			return err
		}
		fd.Path = rel(f)
		man.Remote = append(man.Remote, fd)
	}
	return writeTar(out, func(tw *tar.Writer) error {
		for name, v := range map[string]any{"plan.json": &saved, "bundle.json": &man} {
			b, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
				return err
			}
			if _, err := tw.Write(b); err != nil {
				return err
			}
		}
		for _, f := range embed {
			if err := addFile(tw, f, "files/"+rel(f)); err != nil {
				return err
			}
		}
		return nil
	})
}

func writeTar(out string, fill func(*tar.Writer) error) error {
	// 0644, not a temp file's 0600: the bundle is meant to travel.
	err := atomicfile.WriteFunc(out, 0o644, func(w io.Writer) error {
		tw := tar.NewWriter(w)
		if err := fill(tw); err != nil {
			return err
		}
		return tw.Close()
	})
	if err != nil {
		return fmt.Errorf("write the bundle %s: %w", out, err)
	}
	return nil
}

func addFile(tw *tar.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: st.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err == nil && n != st.Size() {
		err = fmt.Errorf("%s changed size while it was bundled", path)
	}
	return err
}

func commonDir(a, b string) string {
	for {
		if b == a || strings.HasPrefix(b, a+string(filepath.Separator)) {
			return a
		}
		parent := filepath.Dir(a)
		if parent == a {
			return a
		}
		a = parent
	}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// IsBundle reports whether path is a tar (a bundle) rather than a plan.
func IsBundle(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 265)
	n, _ := io.ReadFull(f, b)
	return n == 265 && bytes.HasPrefix(b[257:], []byte("ustar"))
}

// Extract unpacks the bundle at path into dir (which must be empty) and
// returns the path of its plan.json. Files shipped by digest come from
// blobs, digest-checked.
func Extract(ctx context.Context, path, dir string, blobs Blobs) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("bundle %s: %w", path, err)
		}
		name := filepath.FromSlash(h.Name)
		if !filepath.IsLocal(name) || strings.Contains(h.Name, "\\") {
			return "", fmt.Errorf("bundle %s: member %q is not a clean relative path", path, h.Name)
		}
		dst := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return "", err
			}
			continue
		case tar.TypeReg, tar.TypeGNUSparse:
		default:
			return "", fmt.Errorf("bundle %s: member %q is not a regular file (links and devices are refused)", path, h.Name)
		}
		if isSparse(h) {
			// A few bytes in the tar that unpack to gigabytes of zeros.
			return "", fmt.Errorf("bundle %s: member %q is a sparse file (`plan --bundle` writes none): write the bundle again with `edgepipe plan --bundle`", path, h.Name)
		}
		if h.Size > DefaultEmbedLimit {
			return "", fmt.Errorf("bundle %s: member %q is %d bytes, over the %d MiB `plan --bundle` embeds (larger files travel by digest through the remote cache): write the bundle again with `edgepipe plan --bundle`", path, h.Name, h.Size, DefaultEmbedLimit>>20)
		}
		if total += h.Size; h.Size < 0 || total > maxExtract {
			return "", fmt.Errorf("bundle %s: more than %d GiB to unpack", path, maxExtract>>30)
		}
		if err := extractFile(tr, dst, h.Size); err != nil {
			return "", fmt.Errorf("bundle %s: %s: %w", path, h.Name, err)
		}
	}
	var man Manifest
	b, err := os.ReadFile(filepath.Join(dir, "bundle.json"))
	if err == nil {
		err = json.Unmarshal(b, &man)
	}
	if err != nil || man.Format != Format {
		return "", fmt.Errorf("bundle %s: no bundle.json of format %d: write it again with `edgepipe plan --bundle`", path, Format)
	}
	for _, fd := range man.Remote {
		if !filepath.IsLocal(filepath.FromSlash(fd.Path)) {
			return "", fmt.Errorf("bundle %s: remote file %q is not a clean relative path", path, fd.Path)
		}
		if blobs == nil {
			return "", fmt.Errorf("bundle %s ships %s by digest (%d MiB): give --remote-cache to fetch it", path, fd.Path, fd.Size>>20)
		}
		if err := blobs.GetBlob(ctx, fd, filepath.Join(dir, "files", filepath.FromSlash(fd.Path))); err != nil {
			return "", fmt.Errorf("bundle %s: %s: %w", path, fd.Path, err)
		}
	}
	if err := checkRecipe(path, dir); err != nil {
		return "", err
	}
	return filepath.Join(dir, "plan.json"), nil
}

// checkRecipe makes sure plan.json's recipe is a file of the bundle: a
// path that leaves it (absolute, or climbing out with ..) would run, or
// quote in an error, whatever file that path names on the worker.
func checkRecipe(path, dir string) error {
	var pj struct {
		Recipe string `json:"recipe"`
	}
	b, err := boundedfile.Read(filepath.Join(dir, "plan.json"), boundedfile.ManifestLimit)
	if err == nil {
		err = json.Unmarshal(b, &pj)
	}
	if err != nil {
		return fmt.Errorf("bundle %s: no readable plan.json: write it again with `edgepipe plan --bundle`", path)
	}
	rel := filepath.FromSlash(pj.Recipe)
	if filepath.IsLocal(rel) && !strings.Contains(pj.Recipe, "\\") {
		if st, err := os.Lstat(filepath.Join(dir, rel)); err == nil && st.Mode().IsRegular() {
			return nil
		}
	}
	return fmt.Errorf("bundle %s: its plan.json names the recipe %q, which is not a file of the bundle: a bundle runs only the recipe it carries; write it again with `edgepipe plan --bundle`", path, pj.Recipe)
}

// isSparse reports a sparse member: an old GNU one, or a PAX one
// (GNU.sparse.* records), which archive/tar reads as a regular file of its
// full size, holes included.
func isSparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

func extractFile(r io.Reader, dst string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(r, size))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	return err
}
