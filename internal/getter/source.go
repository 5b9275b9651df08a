package getter

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	gogetter "github.com/hashicorp/go-getter"
)

// allowedGetters are the only protocols edgepipe lets go-getter use.
var allowedGetters = []string{"http", "https", "s3", "gcs", "git", "file"}

const sourceForms = "https://..., s3::https://..., gcs::https://..., git::https://... (or git::ssh://...), or a local path"

// forcedRe is go-getter's "getter::url" syntax.
var forcedRe = regexp.MustCompile(`^([A-Za-z0-9]+)::(.+)$`)

// source is a parsed, validated go-getter source.
type source struct {
	getter   string // key into the Getters map
	forced   string // "git" in git::https://..., or ""
	url      *url.URL
	subdir   string // the //subdir part, or ""
	checksum *checksum
	archive  string // decompressor key, "" for none
	// redacted is the source with credentials replaced, for errors and results.
	redacted string
	secrets  []string
}

func parseSource(src, pwd string) (*source, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("empty source: write %s", sourceForms)
	}
	// Only the file detector: shorthands like github.com/x/y would otherwise
	// turn into git clones the recipe never asked for.
	detected, err := gogetter.Detect(src, pwd, []gogetter.Detector{new(gogetter.FileDetector)})
	if err != nil {
		return nil, fmt.Errorf("source %q: %w", Redact(src), err)
	}
	s := &source{}
	rest := detected
	if m := forcedRe.FindStringSubmatch(detected); m != nil {
		s.forced, rest = m[1], m[2]
	}
	rest, s.subdir = gogetter.SourceDirSubdir(rest)
	u, err := url.Parse(rest)
	if err != nil {
		return nil, fmt.Errorf("source %q is not a URL: %w", Redact(src), err)
	}
	s.url = u
	s.getter = s.forced
	if s.getter == "" {
		s.getter = u.Scheme
	}
	s.secrets, s.redacted = secretsOf(s.forced, u, s.subdir)
	if !slices.Contains(allowedGetters, s.getter) {
		return nil, fmt.Errorf("source %s: %q sources are not supported: write %s", s.redacted, s.getter, sourceForms)
	}
	if (s.getter == "http" || s.getter == "https") && (u.Path == "" || strings.HasSuffix(u.Path, "/")) {
		return nil, fmt.Errorf("source %s names a directory: an http(s) source must name one file (an archive is unpacked)", s.redacted)
	}

	q := u.Query()
	if v := q.Get("checksum"); v != "" {
		if s.checksum, err = parseChecksum(v); err != nil {
			return nil, fmt.Errorf("source %s: %w", s.redacted, err)
		}
	}
	q.Del("checksum")
	archive := q.Get("archive")
	q.Del("archive")
	u.RawQuery = q.Encode()
	if s.getter == "git" && s.checksum != nil {
		return nil, fmt.Errorf("source %s: a git source is a directory and cannot carry ?checksum=; pin it with ?ref=<commit> instead", s.redacted)
	}
	if s.archive, err = archiveKind(archive, u.Path); err != nil {
		return nil, fmt.Errorf("source %s: %w", s.redacted, err)
	}
	if s.archive != "" && s.subdir != "" {
		return nil, fmt.Errorf("source %s: a //subdir of an archive is not supported: fetch the archive and point the recipe at the folder inside", s.redacted)
	}
	return s, nil
}

// getterSrc is the source handed to go-getter: checksum removed (checked
// here, so a failing file can be deleted) and archive=false (unpacked here,
// after the checksum and the archive scan).
func (s *source) getterSrc() string {
	u := *s.url
	q := u.Query()
	q.Set("archive", "false")
	u.RawQuery = q.Encode()
	if s.subdir != "" {
		u.Path += "//" + s.subdir
		u.RawPath = u.Path
	}
	out := u.String()
	if s.forced != "" {
		out = s.forced + "::" + out
	}
	return out
}

// archiveKind applies go-getter's rule: ?archive= names the type or turns it
// off, else the longest known extension of the path decides.
func archiveKind(param, path string) (string, error) {
	if param != "" {
		if b, err := strconv.ParseBool(param); err == nil {
			if !b {
				return "", nil
			}
			return "", fmt.Errorf("archive=%s: name the archive type (tar.gz, zip, ...) or write archive=false", param)
		}
		if _, ok := archiveScanners[param]; !ok {
			return "", fmt.Errorf("archive type %q is not supported (known: %s)", param, strings.Join(archiveKinds(), ", "))
		}
		return param, nil
	}
	best := ""
	for _, k := range archiveKinds() {
		if strings.HasSuffix(path, "."+k) && len(k) > len(best) {
			best = k
		}
	}
	return best, nil
}

// checksum is a ?checksum= value. Only sha256 and sha512 are accepted: md5 and
// sha1 do not protect against a hostile server.
type checksum struct {
	algo string
	want []byte
	hash func() hash.Hash
}

func parseChecksum(v string) (*checksum, error) {
	algo, digest, ok := strings.Cut(v, ":")
	if !ok {
		digest = v
		switch len(v) {
		case 64:
			algo = "sha256"
		case 128:
			algo = "sha512"
		default:
			return nil, fmt.Errorf("checksum %q: write checksum=sha256:<64 hex digits>", v)
		}
	}
	c := &checksum{algo: strings.ToLower(algo)}
	switch c.algo {
	case "sha256":
		c.hash = sha256.New
	case "sha512":
		c.hash = sha512.New
	case "file":
		return nil, fmt.Errorf("checksum files are not supported: write the digest itself, checksum=sha256:<hex>")
	default:
		return nil, fmt.Errorf("checksum type %q is not accepted: use sha256 (checksum=sha256:<hex>)", algo)
	}
	want, err := hex.DecodeString(digest)
	if err != nil || len(want) != c.hash().Size() {
		return nil, fmt.Errorf("checksum %s:%s is not %d hex digits", c.algo, digest, 2*c.hash().Size())
	}
	c.want = want
	return c, nil
}

// sensitiveParams are query parameters that carry credentials: go-getter's
// own (sshkey, aws_*) and those of presigned S3 and GCS URLs.
var sensitiveParams = []string{
	"sshkey", "aws_access_key_id", "aws_access_key_secret", "aws_access_token",
	"x-amz-signature", "x-amz-credential", "x-amz-security-token",
	"x-goog-signature", "x-goog-credential", "signature", "sig", "token", "access_token",
}

// SensitiveParams lists the query parameters that carry credentials, in
// lower case, for other code that must refuse or mask them.
func SensitiveParams() []string { return slices.Clone(sensitiveParams) }

// secretsOf returns the credential strings in a source and the source with
// them replaced.
func secretsOf(forced string, u *url.URL, subdir string) ([]string, string) {
	var secrets []string
	ru := *u
	if pw, ok := u.User.Password(); ok && pw != "" {
		secrets = append(secrets, pw, url.QueryEscape(pw), url.PathEscape(pw))
		ru.User = url.UserPassword(u.User.Username(), "redacted")
	}
	q := u.Query()
	changed := false
	for name, values := range q {
		if !slices.Contains(sensitiveParams, strings.ToLower(name)) {
			continue
		}
		for i, v := range values {
			if v != "" {
				secrets = append(secrets, v, url.QueryEscape(v))
			}
			values[i] = "redacted"
		}
		changed = true
	}
	if changed {
		ru.RawQuery = q.Encode()
	}
	out := ru.String()
	if subdir != "" {
		out += "//" + subdir
	}
	if forced != "" {
		out = forced + "::" + out
	}
	return secrets, out
}

// scrub removes every secret from text.
func (s *source) scrub(text string) string {
	for _, sec := range s.secrets {
		if len(sec) >= 3 {
			text = strings.ReplaceAll(text, sec, "redacted")
		}
	}
	return text
}
