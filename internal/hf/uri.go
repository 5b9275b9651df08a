// Package hf is a native Hugging Face Hub client: it resolves hf:// sources to
// commits, downloads them in parallel with resume and sha256 verification, and
// writes the cache layout huggingface_hub uses, so Python tools that run later
// find the files without downloading them again.
package hf

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Repo names one Hugging Face repository at one revision.
type Repo struct {
	// Type is "model" or "dataset".
	Type string `json:"type"`
	// ID is "org/name".
	ID string `json:"id"`
	// Revision is a branch, tag or commit sha; "main" when the URI names none.
	Revision string `json:"revision"`
}

const (
	TypeModel   = "model"
	TypeDataset = "dataset"

	// DefaultRevision is what huggingface_hub uses when no revision is given.
	DefaultRevision = "main"
)

// Hub repo names: letters, digits, '-', '_', '.', not starting or ending with
// '-' or '.', at most 96 characters. "--" and ".." are refused separately
// because "--" is the cache folder separator and ".." a path escape.
var (
	namePart    = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$`)
	revisionRe  = regexp.MustCompile(`^[A-Za-z0-9_.\-/]{1,255}$`)
	commitRe    = regexp.MustCompile(`^[0-9a-f]{40}$`)
	sha256Re    = regexp.MustCompile(`^[0-9a-f]{64}$`)
	uriExamples = "hf://org/name, hf://org/name@revision or hf://datasets/org/name@revision"
)

// ParseURI parses hf://org/name[@revision] and hf://datasets/org/name[@revision].
func ParseURI(s string) (Repo, error) {
	rest, ok := strings.CutPrefix(s, "hf://")
	if !ok {
		return Repo{}, fmt.Errorf("%q is not a Hugging Face source: write it as %s", s, uriExamples)
	}
	repo := Repo{Type: TypeModel, Revision: DefaultRevision}
	if r, ok := strings.CutPrefix(rest, "datasets/"); ok {
		repo.Type = TypeDataset
		rest = r
	} else if r, ok := strings.CutPrefix(rest, "models/"); ok {
		rest = r
	}
	if id, rev, ok := strings.Cut(rest, "@"); ok {
		rest = id
		repo.Revision = rev
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 2 {
		return Repo{}, fmt.Errorf("%q: a Hugging Face repository is named org/name (%s)", s, uriExamples)
	}
	for _, p := range parts {
		if !namePart.MatchString(p) || strings.Contains(p, "--") || strings.Contains(p, "..") {
			return Repo{}, fmt.Errorf("%q: %q is not a valid Hugging Face name (letters, digits, '-', '_', '.', no '--' or '..')", s, p)
		}
	}
	repo.ID = rest
	if err := validRevision(repo.Revision); err != nil {
		return Repo{}, fmt.Errorf("%q: %w", s, err)
	}
	return repo, nil
}

func validRevision(rev string) error {
	if !revisionRe.MatchString(rev) || strings.HasPrefix(rev, "/") || strings.HasSuffix(rev, "/") ||
		strings.Contains(rev, "//") || containsDotDot(rev) {
		return fmt.Errorf("revision %q is not a valid branch, tag or commit", rev)
	}
	return nil
}

func containsDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "." {
			return true
		}
	}
	return false
}

// String returns the repo as an hf:// URI.
func (r Repo) String() string {
	prefix := "hf://"
	if r.Type == TypeDataset {
		prefix += "datasets/"
	}
	return prefix + r.ID + "@" + r.Revision
}

// folderName is the huggingface_hub cache folder: models--org--name.
func (r Repo) folderName() string {
	return r.Type + "s--" + strings.ReplaceAll(r.ID, "/", "--")
}

// apiPath is the repo's path under /api: models/org/name.
func (r Repo) apiPath() string { return r.Type + "s/" + r.ID }

// resolvePath is the URL path of one file at one revision, escaped the way
// huggingface_hub escapes it: the revision as a single segment, the file path
// segment by segment.
func (r Repo) resolvePath(revision, file string) string {
	prefix := "/"
	if r.Type == TypeDataset {
		prefix = "/datasets/"
	}
	segs := strings.Split(file, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return prefix + r.ID + "/resolve/" + url.PathEscape(revision) + "/" + strings.Join(segs, "/")
}

// isCommit reports whether rev is a full commit sha, which needs no refs/ entry.
func isCommit(rev string) bool { return commitRe.MatchString(rev) }
