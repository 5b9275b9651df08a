// Package remote parses and serves the places a target is published to
// besides its local folder: OCI registries (oci://host[:port]/repo[:tag])
// and S3-compatible object storage (s3::https://host/bucket/prefix).
//
// Credentials never appear in a destination: the parser refuses them, so a
// destination is safe to print, record and put in events. Registries read
// the Docker config; S3 reads the AWS SDK's standard chain.
package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"

	"oras.land/oras-go/v2/registry"
	orasremote "oras.land/oras-go/v2/registry/remote"

	"github.com/edgepipe/edgepipe/internal/getter"
	"github.com/edgepipe/edgepipe/internal/oci"
)

// Destination kinds.
const (
	KindOCI = "oci"
	KindS3  = "s3"
)

// Destination is one parsed, validated remote.
type Destination struct {
	// URL is the destination as the recipe wrote it.
	URL  string
	Kind string
	// Insecure allows plain HTTP to a registry that is not on loopback.
	Insecure bool

	oci registry.Reference // Reference is "" when the tag defaults
	s3  *s3Location
}

// Forms names the accepted forms, for error messages.
const Forms = "oci://HOST[:PORT]/REPOSITORY[:TAG] or s3::https://HOST/BUCKET/PREFIX"

var tagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// Parse validates a destination. The error says what is wrong and how to
// write it.
func Parse(raw string, insecure bool) (*Destination, error) {
	d, err := parse(raw, insecure)
	if err != nil {
		// Errors echo the destination; never with credentials in it.
		return nil, errors.New(redact(err.Error()))
	}
	return d, nil
}

var (
	userinfoRE = regexp.MustCompile(`://[^/@]*@`)
	// secretRE masks the value of every credential parameter the getter
	// knows (aws_*, presigned S3/GCS signatures, tokens).
	secretRE = regexp.MustCompile(`(?i)([?&](?:` + strings.Join(getter.SensitiveParams(), "|") + `)=)[^&#\s":]*`)
)

// redact replaces URL user info and credential parameters in text.
func redact(text string) string {
	text = userinfoRE.ReplaceAllString(text, "://redacted@")
	return secretRE.ReplaceAllString(text, "${1}redacted")
}

func parse(raw string, insecure bool) (*Destination, error) {
	d := &Destination{URL: raw, Insecure: insecure}
	switch {
	case strings.HasPrefix(raw, "oci://"):
		d.Kind = KindOCI
		rest := strings.TrimPrefix(raw, "oci://")
		if strings.ContainsAny(rest, "@?#") {
			if strings.Contains(strings.SplitN(rest, "/", 2)[0], "@") {
				return nil, fmt.Errorf("%s holds credentials: log in with `docker login HOST` instead; edgepipe reads the Docker config", raw)
			}
			return nil, fmt.Errorf("%s: a destination names a tag, not a digest, query or fragment: write %s", raw, Forms)
		}
		host, path, ok := strings.Cut(rest, "/")
		if !ok || host == "" || path == "" {
			return nil, fmt.Errorf("%s names no repository: write %s", raw, Forms)
		}
		repo, tag := path, ""
		if i := strings.LastIndex(path, ":"); i >= 0 {
			repo, tag = path[:i], path[i+1:]
			if !tagRE.MatchString(tag) {
				return nil, fmt.Errorf("%s: tag %q is not a valid tag (letters, digits, '_', '.', '-', up to 128, not starting with '.' or '-')", raw, tag)
			}
		}
		ref := registry.Reference{Registry: host, Repository: repo, Reference: tag}
		// Validate with a placeholder tag when it defaults to the target's name.
		check := ref
		if check.Reference == "" {
			check.Reference = "latest"
		}
		if err := check.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %v: a repository is lowercase letters, digits and separators (. _ __ - /)", raw, err)
		}
		d.oci = ref
	case strings.HasPrefix(raw, "s3::"):
		d.Kind = KindS3
		loc, err := parseS3(strings.TrimPrefix(raw, "s3::"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", raw, err)
		}
		d.s3 = loc
		if loc.plainHTTP() && !insecure && !isLoopback(loc.host) {
			return nil, fmt.Errorf("%s uses plain http to a host that is not this machine: use https, or set insecure: true on this destination if the network is trusted", raw)
		}
	default:
		hint := ""
		if strings.HasPrefix(raw, "s3://") {
			hint = " (go-getter's S3 form: s3::https://s3.REGION.amazonaws.com/BUCKET/PREFIX, or s3::https://HOST:PORT/BUCKET/PREFIX for S3-compatible storage)"
		}
		return nil, fmt.Errorf("%q is not a destination edgepipe can publish to: write %s%s", raw, Forms, hint)
	}
	return d, nil
}

// Reference is the OCI reference pushed for target: the destination's tag,
// or the target's name when the destination has none.
func (d *Destination) Reference(target string) registry.Reference {
	r := d.oci
	if r.Reference == "" {
		r.Reference = target
	}
	return r
}

// Where names the place target lands: oci://HOST/REPO:TAG, or the S3
// prefix. Two pushes with the same Where replace each other.
func (d *Destination) Where(target string) string {
	if d.Kind == KindS3 {
		return d.s3.display(target)
	}
	return "oci://" + d.Reference(target).String()
}

// PlainHTTP reports whether the registry is reached over plain HTTP: only
// on loopback (a registry started for development or tests), or when the
// recipe allows it with insecure: true.
func (d *Destination) PlainHTTP() bool {
	return d.Insecure || isLoopback(d.oci.Host())
}

func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Result is where a push put the artifact.
type Result struct {
	// Where names the pushed artifact exactly: oci://HOST/REPO:TAG@DIGEST,
	// or the S3 prefix.
	Where string
	// Uploaded counts what had to be sent (blobs or objects).
	Uploaded int
}

// Push publishes the artifact folder dir of target to d.
func (d *Destination) Push(ctx context.Context, dir, target string) (*Result, error) {
	switch d.Kind {
	case KindOCI:
		ref := d.Reference(target)
		p, err := oci.Push(ctx, dir, ref, oci.Options{PlainHTTP: d.PlainHTTP()})
		if err != nil {
			return nil, err
		}
		return &Result{Where: "oci://" + ref.String() + "@" + p.Manifest.Digest.String(), Uploaded: p.Uploaded}, nil
	case KindS3:
		n, err := d.s3.upload(ctx, dir, target)
		if err != nil {
			return nil, err
		}
		return &Result{Where: d.s3.display(target), Uploaded: n}, nil
	}
	return nil, fmt.Errorf("destination %s: unknown kind %q", d.URL, d.Kind)
}

// PullOCI downloads an artifact pushed by Push into dest and verifies it
// against its manifest. raw is an oci:// reference with a tag.
func PullOCI(ctx context.Context, raw, dest string, insecure bool, accept func(staging string) error) (string, error) {
	d, err := Parse(raw, insecure)
	if err != nil {
		return "", err
	}
	if d.Kind != KindOCI {
		return "", fmt.Errorf("%s: only oci:// artifacts can be pulled", raw)
	}
	if d.oci.Reference == "" {
		return "", fmt.Errorf("%s names no tag: write oci://HOST/REPOSITORY:TAG", raw)
	}
	desc, err := oci.Pull(ctx, d.oci, dest, oci.Options{PlainHTTP: d.PlainHTTP(), Accept: accept})
	if err != nil {
		return "", err
	}
	return "oci://" + d.oci.String() + "@" + desc.Digest.String(), nil
}

// OCIRepository opens an oci:// destination's repository for object-level
// access (the remote cache); a tag in the URL is refused there. hc, when
// not nil, makes the requests (the remote cache's, with its timeouts); nil
// is oras-go's retrying default.
func (d *Destination) OCIRepository(hc *http.Client) (*orasremote.Repository, error) {
	if d.Kind != KindOCI {
		return nil, fmt.Errorf("%s is not an oci:// location", d.URL)
	}
	if d.oci.Reference != "" {
		return nil, fmt.Errorf("%s names a tag: a remote cache is a repository, oci://HOST[:PORT]/REPOSITORY", d.URL)
	}
	return oci.Repository(d.oci, oci.Options{PlainHTTP: d.PlainHTTP(), HTTPClient: hc})
}
