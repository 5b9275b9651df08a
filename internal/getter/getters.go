package getter

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	gogetter "github.com/hashicorp/go-getter"
)

// modeRecorder notes whether go-getter fetched a file or a directory: with
// ClientModeAny only the getter knows, and the answer decides whether the
// checksum and the archive step apply.
type modeRecorder struct{ file, dir bool }

type recordingGetter struct {
	gogetter.Getter
	rec *modeRecorder
}

func (g recordingGetter) Get(dst string, u *url.URL) error {
	g.rec.dir = true
	return g.Getter.Get(dst, u)
}

func (g recordingGetter) GetFile(dst string, u *url.URL) error {
	g.rec.file = true
	return g.Getter.GetFile(dst, u)
}

// newGetters builds fresh getters for one fetch (go-getter stores the client
// in each getter, so they cannot be shared between concurrent fetches).
func newGetters(opts Options, hc *http.Client, rec *modeRecorder) map[string]gogetter.Getter {
	httpGetter := &gogetter.HttpGetter{
		Client: hc,
		Header: http.Header{"User-Agent": {"edgepipe"}},
		// X-Terraform-Get lets a server redirect the fetch to any other
		// protocol; model downloads have no use for it.
		XTerraformGetDisabled: true,
		// go-getter resumes by appending to an existing destination with a
		// bare Range (no If-Range), which corrupts a file that changed on the
		// server. edgepipe always downloads into a fresh temporary directory,
		// so there is never anything to resume, and skipping the HEAD request
		// keeps go-getter from trying.
		DoNotCheckHeadFirst: true,
		ReadTimeout:         opts.Timeout,
		MaxBytes:            opts.MaxBytes,
	}
	wrap := func(g gogetter.Getter) gogetter.Getter { return recordingGetter{Getter: g, rec: rec} }
	return map[string]gogetter.Getter{
		"http":  wrap(httpGetter),
		"https": wrap(httpGetter),
		"s3":    wrap(&gogetter.S3Getter{Timeout: opts.Timeout}),
		"gcs":   wrap(&gogetter.GCSGetter{Timeout: opts.Timeout, FileSizeLimit: opts.MaxBytes}),
		"git":   wrap(&gogetter.GitGetter{Timeout: opts.Timeout}),
		"file":  wrap(&localGetter{FileGetter: gogetter.FileGetter{Copy: true}}),
	}
}

// localGetter copies local files and directories. go-getter's FileGetter
// links a directory instead of copying it, which would let later steps write
// into the user's source folder.
//
// Symlinks inside a local source are followed: the files are the user's own
// (a Hugging Face snapshot folder is nothing but links into its blobs), so
// this reads nothing the recipe could not name directly. Symlinks in fetched
// remote content (archives, git checkouts) are refused elsewhere.
type localGetter struct {
	gogetter.FileGetter
}

func (g *localGetter) GetFile(dst string, u *url.URL) error {
	path, err := filepath.EvalSymlinks(localPath(u))
	if err != nil {
		return fmt.Errorf("source path error: %w", err)
	}
	r := *u
	r.Path, r.RawPath = path, ""
	return g.FileGetter.GetFile(dst, &r)
}

func (g *localGetter) Get(dst string, u *url.URL) error {
	src, err := filepath.EvalSymlinks(localPath(u))
	if err != nil {
		return fmt.Errorf("source path error: %w", err)
	}
	ctx := g.Context()
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := os.Stat(path) // follows a symlink to its file
		if err != nil {
			return fmt.Errorf("local source %s: %w", path, err)
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case info.IsDir():
			return fmt.Errorf("local source %s is a symlink to a directory: copy or move that directory into place instead", path)
		case !info.Mode().IsRegular():
			return fmt.Errorf("local source %s is not a regular file", path)
		}
		return copyLocalFile(target, path, info.Mode().Perm())
	})
}

func localPath(u *url.URL) string {
	if u.RawPath != "" {
		return u.RawPath
	}
	return u.Path
}

func copyLocalFile(dst, src string, perm fs.FileMode) error {
	_, _, err := atomicfile.Copy(dst, src, perm&^0o022|0o600)
	return err
}

// progressTracker adapts go-getter's progress interface to a callback.
type progressTracker struct {
	fn func(file string, done, total int64)
}

func (p progressTracker) TrackProgress(src string, current, total int64, stream io.ReadCloser) io.ReadCloser {
	return &progressReader{ReadCloser: stream, fn: p.fn, name: filepath.Base(src), done: current, total: total}
}

type progressReader struct {
	io.ReadCloser
	fn          func(string, int64, int64)
	name        string
	done, total int64
}

func (r *progressReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	if n > 0 {
		r.done += int64(n)
		r.fn(r.name, r.done, r.total)
	}
	return n, err
}
