package shared

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/edgepipe/edgepipe/internal/hf"
)

var commitSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// PinRevision returns the source that fetches exactly the given commit:
// hf://org/name@COMMIT for Hugging Face, ?ref=COMMIT for git. ok is false
// for sources without revisions (builtin:, URLs, local folders) and for a
// revision that is not a full commit sha.
func PinRevision(src, commit string) (pinned string, ok bool) {
	if !commitSHA.MatchString(commit) {
		return "", false
	}
	if strings.HasPrefix(src, "hf://") {
		repo, err := hf.ParseURI(src)
		if err != nil {
			return "", false
		}
		repo.Revision = commit
		return repo.String(), true
	}
	if rest, isGit := strings.CutPrefix(src, "git::"); isGit {
		u, err := url.Parse(rest)
		if err != nil {
			return "", false
		}
		q := u.Query()
		q.Set("ref", commit)
		u.RawQuery = q.Encode()
		return "git::" + u.String(), true
	}
	return "", false
}

// MovingRevision reports whether a source names a revision that can move
// (a branch or tag of a Hugging Face or git repository, "main" when none
// is written): fetching it again may bring other files.
func MovingRevision(src string) bool {
	if strings.HasPrefix(src, "hf://") {
		repo, err := hf.ParseURI(src)
		return err == nil && !commitSHA.MatchString(repo.Revision)
	}
	if rest, isGit := strings.CutPrefix(src, "git::"); isGit {
		u, err := url.Parse(rest)
		return err == nil && !commitSHA.MatchString(u.Query().Get("ref"))
	}
	return false
}
