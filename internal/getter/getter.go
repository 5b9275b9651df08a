// Package getter fetches model sources that are not on the Hugging Face Hub
// (https, s3, gcs, git, local paths) through go-getter v1, locked down: only
// those protocols, no symlinks, no X-Terraform-Get redirects, bounded
// archives, timeouts, and ?checksum= verified here so a file that fails it is
// deleted instead of kept.
package getter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	gogetter "github.com/hashicorp/go-getter"

	"github.com/edgepipe/edgepipe/internal/proc"
)

// Options bound a fetch. Zero values take the defaults below.
type Options struct {
	// Pwd is the base of relative local paths; "" is the current directory.
	Pwd string
	// MaxFiles caps the entries of an archive (default 10,000).
	MaxFiles int
	// MaxBytes caps what an archive unpacks to and what one HTTP or GCS
	// download may be (default 128 GiB).
	MaxBytes int64
	// Timeout caps the whole fetch (default 6 hours).
	Timeout time.Duration
	// HeaderTimeout caps the wait for an HTTP server's response headers
	// (default 60 seconds).
	HeaderTimeout time.Duration
	// Progress, when set, is called as bytes arrive over HTTP.
	Progress func(file string, done, total int64)
}

const (
	defaultMaxFiles      = 10_000
	defaultMaxBytes      = 128 << 30
	defaultTimeout       = 6 * time.Hour
	defaultHeaderTimeout = 60 * time.Second
)

func (o Options) withDefaults() (Options, error) {
	if o.MaxFiles <= 0 {
		o.MaxFiles = defaultMaxFiles
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultMaxBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = defaultHeaderTimeout
	}
	if o.Pwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return o, err
		}
		o.Pwd = wd
	}
	return o, nil
}

// Result is what a fetch put into its destination.
type Result struct {
	// Source is the source with credentials replaced by "redacted".
	Source string `json:"source"`
	Dir    string `json:"dir"`
	// Files are every file under Dir, sorted by path.
	Files []File `json:"files"`
	// GitCommit is the commit checked out, for git sources.
	GitCommit string `json:"git_commit,omitempty"`
}

// File is one fetched file.
type File struct {
	// Path is relative to Result.Dir, with forward slashes.
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Fetch downloads src into the directory dst, which must not exist or be
// empty. A single file lands as dst/<name>; an archive (by extension or
// ?archive=) is checked and unpacked into dst; a directory or git repository
// becomes dst itself, without its .git folder. Nothing is left at dst unless
// the whole fetch succeeds.
func Fetch(ctx context.Context, src, dst string, opts Options) (*Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s, err := parseSource(src, opts.Pwd)
	if err != nil {
		return nil, err
	}
	if err := checkDestination(dst); err != nil {
		return nil, fmt.Errorf("fetch %s: %w", s.redacted, err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	res, err := fetch(ctx, s, dst, opts)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("fetch %s: %w (Options.Timeout is %s)", s.redacted, ctx.Err(), opts.Timeout)
		}
		// go-getter's and git's messages can quote the URL with its
		// credentials; the chain is dropped so they cannot leak via Unwrap,
		// keeping only whether a retry may succeed.
		out := errors.New(s.scrub(fmt.Sprintf("fetch %s: %v", s.redacted, err)))
		if transient(err) {
			out = proc.Transient(out)
		}
		return nil, out
	}
	return res, nil
}

// Check validates a source as Fetch would, without fetching it.
func Check(src string) error {
	_, err := parseSource(src, string(filepath.Separator))
	return err
}

func fetch(ctx context.Context, s *source, dst string, opts Options) (*Result, error) {
	// The staging directory sits beside dst so the final move is a rename.
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, err
	}
	staging, err := os.MkdirTemp(filepath.Dir(dst), ".fetch-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(staging)
	download := filepath.Join(staging, "download")
	out := filepath.Join(staging, "out")

	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.ResponseHeaderTimeout = opts.HeaderTimeout
	rec := &modeRecorder{}
	client := &gogetter.Client{
		Ctx:             ctx,
		Src:             s.getterSrc(),
		Dst:             download,
		Pwd:             opts.Pwd,
		Mode:            gogetter.ClientModeAny,
		Detectors:       []gogetter.Detector{new(gogetter.FileDetector)},
		Decompressors:   gogetter.LimitedDecompressors(opts.MaxFiles, opts.MaxBytes),
		Getters:         newGetters(opts, &http.Client{Transport: transport}, rec),
		DisableSymlinks: true,
		Umask:           0o022,
	}
	if opts.Progress != nil {
		client.ProgressListener = progressTracker{fn: opts.Progress}
	}
	if err := client.Get(); err != nil {
		return nil, err
	}

	switch {
	case rec.file:
		if err := placeFile(s, download, out, opts); err != nil {
			// The bytes are here: what is wrong with them (a bad checksum,
			// a malformed or hostile archive) would be wrong again.
			return nil, proc.Permanent(err)
		}
	case rec.dir:
		if s.checksum != nil {
			return nil, errors.New("?checksum= needs a single-file source, and this one is a directory")
		}
		if err := os.Rename(download, out); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("go-getter fetched nothing")
	}

	res := &Result{Source: s.redacted, Dir: dst}
	if s.getter == "git" {
		if res.GitCommit, err = gitHead(ctx, out); err != nil {
			return nil, err
		}
		if err := removeGitDirs(out); err != nil {
			return nil, err
		}
	}
	if res.Files, err = inventory(out); err != nil {
		return nil, err
	}
	if len(res.Files) == 0 {
		return nil, errors.New("the source holds no files")
	}
	if err := install(out, dst); err != nil {
		return nil, err
	}
	return res, nil
}

// placeFile verifies a downloaded file and moves or unpacks it into out. A
// file that fails its checksum is deleted before anything else happens.
func placeFile(s *source, download, out string, opts Options) error {
	entries, err := os.ReadDir(download)
	if err != nil {
		return err
	}
	if len(entries) != 1 || !entries[0].Type().IsRegular() {
		return fmt.Errorf("expected one downloaded file in %s, found %d entries", download, len(entries))
	}
	name := entries[0].Name()
	file := filepath.Join(download, name)
	if s.checksum != nil {
		if err := verify(file, s.checksum); err != nil {
			if rmErr := os.Remove(file); rmErr != nil {
				return fmt.Errorf("%w; deleting it failed too: %v", err, rmErr)
			}
			return err
		}
	}
	if s.archive != "" {
		return unpack(s.archive, file, out, name, limits{files: opts.MaxFiles, bytes: opts.MaxBytes})
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	return os.Rename(file, filepath.Join(out, name))
}

func verify(file string, c *checksum) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	h := c.hash()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := h.Sum(nil); !bytes.Equal(got, c.want) {
		return fmt.Errorf("%s failed its checksum: %s is %s, the source says %s; the file was deleted: check the ?checksum= value or the source",
			filepath.Base(file), c.algo, hex.EncodeToString(got), hex.EncodeToString(c.want))
	}
	return nil
}

func gitHead(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "HEAD")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("read the checked-out commit: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// removeGitDirs drops .git folders (and submodules' .git files): repository
// metadata is not model content, and its hooks and config must not travel.
func removeGitDirs(root string) error {
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			found = append(found, path)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range found {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// inventory hashes every file under root and refuses anything that is not a
// regular file or directory: a symlink in fetched content could point
// anywhere on this machine.
func inventory(root string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			return fmt.Errorf("the fetched content has a symlink (%s): edgepipe refuses symlinks in downloads", filepath.ToSlash(rel))
		case !d.Type().IsRegular():
			return fmt.Errorf("the fetched content has %s, which is not a regular file", filepath.ToSlash(rel))
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return err
		}
		files = append(files, File{Path: filepath.ToSlash(rel), Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, err
}

func checkDestination(dst string) error {
	entries, err := os.ReadDir(dst)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("destination %s: %w", dst, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("destination %s already exists and is not empty: fetch into a new directory", dst)
	}
	return nil
}

// install moves the finished tree to dst in one rename.
func install(out, dst string) error {
	if err := checkDestination(dst); err != nil {
		return err
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Rename(out, dst)
}

// Errors go-getter reports as text only: an HTTP status (5xx and 429 may
// pass) and git's network failures.
var (
	retryableStatusRE = regexp.MustCompile(`bad response code: (5\d\d|429)\b`)
	gitNetworkRE      = regexp.MustCompile(`(?i)could not resolve host|connection (refused|reset|timed out)|early EOF|remote end hung up|RPC failed|returned error: (5\d\d|429)`)
)

// transient reports whether a failed fetch may succeed when tried again:
// a network failure or a server that is down or rate-limiting. A 4xx, a
// refused archive, a bad checksum or a missing file fails the same way
// every time.
func transient(err error) bool {
	if proc.IsTransient(err) {
		return true
	}
	var status interface{ StatusCode() int } // S3 and GCS SDK errors
	if errors.As(err, &status) {
		c := status.StatusCode()
		return c >= 500 || c == http.StatusTooManyRequests
	}
	msg := err.Error()
	return retryableStatusRE.MatchString(msg) || gitNetworkRE.MatchString(msg)
}
