package remote

// S3 publishing. go-getter (edgepipe's download library, which reads
// s3:: sources) only downloads: its Getter interface has Get and GetFile and
// nothing that writes. Uploads therefore go through the AWS SDK's S3 client
// directly, the same SDK (already a dependency of go-getter) and the same
// URL forms, so a folder published to s3::URL/ can be read back as a
// source from s3::URL/FILE.

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/edgepipe/edgepipe/internal/getter"
	"github.com/edgepipe/edgepipe/internal/manifest"
)

// maxPutObject is the largest object one PutObject may write; larger ones
// need a multipart upload, which this does not do.
const maxPutObject = 5 << 30

// s3Location is a parsed s3:: destination.
type s3Location struct {
	scheme, host string
	bucket       string
	// prefix is the key prefix without a trailing slash; perTarget means
	// the URL ended in '/' and each target goes under prefix/TARGET.
	prefix    string
	perTarget bool
	region    string
	profile   string
	// endpoint is set for S3-compatible storage (path-style requests);
	// empty for AWS, where the SDK picks the endpoint.
	endpoint string
}

func parseS3(raw string) (*s3Location, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("write s3::https://HOST/BUCKET/PREFIX (an http or https URL after s3::)")
	}
	if u.User != nil {
		return nil, errors.New("the URL holds credentials: give them to the AWS SDK instead (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or an instance role)")
	}
	q := u.Query()
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if slices.Contains(getter.SensitiveParams(), strings.ToLower(k)) {
			return nil, fmt.Errorf("the URL holds %s: credentials in a recipe end up in manifests and logs; give them to the AWS SDK instead (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or an instance role)", k)
		}
	}
	for k := range q {
		if k != "region" && k != "aws_profile" {
			return nil, fmt.Errorf("unknown query parameter %q (known: region, aws_profile)", k)
		}
	}
	loc := &s3Location{scheme: u.Scheme, host: u.Host, region: q.Get("region"), profile: q.Get("aws_profile")}
	p := strings.TrimPrefix(u.Path, "/")
	if base, ok := awsBase(u.Host); ok {
		// s3.amazonaws.com, s3.REGION..., s3-REGION...: path style;
		// BUCKET.s3.REGION...: virtual-hosted style.
		parts := strings.Split(base, ".")
		switch {
		case len(parts) == 1:
			loc.region = firstNonEmpty(loc.region, strings.TrimPrefix(strings.TrimPrefix(parts[0], "s3-"), "s3"), "us-east-1")
			loc.bucket, p, _ = strings.Cut(p, "/")
		case len(parts) == 2 && (parts[0] == "s3" || strings.HasPrefix(parts[0], "s3-")):
			loc.region = firstNonEmpty(loc.region, parts[1])
			loc.bucket, p, _ = strings.Cut(p, "/")
		case len(parts) == 3 && parts[1] == "s3":
			loc.bucket, loc.region = parts[0], firstNonEmpty(loc.region, parts[2])
		case len(parts) == 2 && strings.HasPrefix(parts[1], "s3-"):
			loc.bucket, loc.region = parts[0], firstNonEmpty(loc.region, strings.TrimPrefix(parts[1], "s3-"))
		default:
			return nil, fmt.Errorf("host %s is not an S3 endpoint edgepipe understands (s3.REGION.amazonaws.com or BUCKET.s3.REGION.amazonaws.com)", u.Host)
		}
	} else {
		loc.endpoint = u.Scheme + "://" + u.Host
		loc.region = firstNonEmpty(loc.region, "us-east-1")
		loc.bucket, p, _ = strings.Cut(p, "/")
	}
	if loc.bucket == "" {
		return nil, errors.New("names no bucket: write s3::https://HOST/BUCKET/PREFIX")
	}
	loc.perTarget = p == "" || strings.HasSuffix(p, "/")
	loc.prefix = strings.TrimSuffix(p, "/")
	if loc.prefix != "" && !fsValid(loc.prefix) {
		return nil, fmt.Errorf("prefix %q is not a clean slash-separated path", loc.prefix)
	}
	return loc, nil
}

func fsValid(p string) bool {
	return path.Clean(p) == p && !strings.HasPrefix(p, "../") && p != ".." && !strings.Contains(p, "//")
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// awsBase returns the host without the AWS DNS suffix, for AWS hosts.
func awsBase(host string) (string, bool) {
	for _, suffix := range []string{".amazonaws.com.cn", ".amazonaws.com"} {
		if base, ok := strings.CutSuffix(host, suffix); ok {
			return base, true
		}
	}
	return "", false
}

// folder is the key prefix a target's files go under.
func (l *s3Location) folder(target string) string {
	if !l.perTarget {
		return l.prefix
	}
	return strings.TrimPrefix(l.prefix+"/"+target, "/")
}

func (l *s3Location) display(target string) string {
	return "s3::" + l.scheme + "://" + l.host + "/" + l.bucket + "/" + l.folder(target) + "/"
}

// PlainHTTP reports whether an s3:: destination uses plain HTTP.
func (l *s3Location) plainHTTP() bool { return l.scheme == "http" }

func (l *s3Location) client(ctx context.Context, more ...func(*s3.Options)) (*s3.Client, error) {
	opts := []func(*config.LoadOptions) error{config.WithRegion(l.region)}
	if l.profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(l.profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){func(o *s3.Options) {
		if l.endpoint != "" {
			o.BaseEndpoint = aws.String(l.endpoint)
			o.UsePathStyle = true
		}
	}}, more...)...), nil
}

// upload writes every file of the folder's manifest, then manifest.json,
// then the provenance sidecars, under folder(target). S3 has no atomic
// folder rename: a reader that sees manifest.json knows the files it lists
// are there, and `edgepipe verify` on a download checks them. Each object
// carries its SHA-256, which S3 checks on receipt, and an object that
// already holds the same bytes is not sent again.
func (l *s3Location) upload(ctx context.Context, dir, target string) (int, error) {
	m, err := manifest.Read(dir)
	if err != nil {
		return 0, err
	}
	cl, err := l.client(ctx)
	if err != nil {
		return 0, err
	}
	// The listed files' digests come from the manifest (the folder was
	// verified when it was published), so a rerun reads no model bytes;
	// S3 checks each upload against the digest it is sent with.
	known := map[string]string{}
	files := make([]string, 0, len(m.Files)+3)
	for _, f := range m.Files {
		files = append(files, f.Path)
		known[f.Path] = f.SHA256
	}
	files = append(files, manifest.FileName, manifest.ProvenanceFile, manifest.SignatureFile)
	uploaded := 0
	for _, rel := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) && manifest.IsSidecar(rel) {
			continue
		}
		sent, err := l.put(ctx, cl, p, path.Join(l.folder(target), rel), known[rel])
		if err != nil {
			return uploaded, fmt.Errorf("upload %s to %s: %w", rel, l.display(target), explainS3(err))
		}
		if sent {
			uploaded++
		}
	}
	return uploaded, nil
}

// put uploads the file p as key unless the object already holds it.
// sha256Hex is the file's digest when known, else put hashes the file.
func (l *s3Location) put(ctx context.Context, cl *s3.Client, p, key, sha256Hex string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	if st.Size() > maxPutObject {
		return false, fmt.Errorf("%s is %d bytes; objects over 5 GiB need a multipart upload, which edgepipe does not do yet: push it to an OCI registry instead", p, st.Size())
	}
	sum, err := hex.DecodeString(sha256Hex)
	if err != nil || len(sum) != sha256.Size {
		h := sha256.New()
		if _, err := f.WriteTo(h); err != nil {
			return false, err
		}
		sum = h.Sum(nil)
	}
	checksum := base64.StdEncoding.EncodeToString(sum)
	head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &l.bucket, Key: &key, ChecksumMode: types.ChecksumModeEnabled})
	if err == nil && aws.ToInt64(head.ContentLength) == st.Size() &&
		(aws.ToString(head.ChecksumSHA256) == checksum || head.Metadata["sha256"] == hex.EncodeToString(sum)) {
		return false, nil
	}
	if _, err := f.Seek(0, 0); err != nil {
		return false, err
	}
	_, err = cl.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &l.bucket, Key: &key, Body: f, ContentLength: aws.Int64(st.Size()),
		ChecksumSHA256: aws.String(checksum),
		// Also as metadata: not every S3-compatible store keeps checksums.
		Metadata: map[string]string{"sha256": hex.EncodeToString(sum)},
	})
	return err == nil, err
}

// explainS3 adds what to do to errors a user can fix.
func explainS3(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken":
			return fmt.Errorf("%w: give the AWS SDK credentials that may write there (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or an instance role)", err)
		case "NoSuchBucket":
			return fmt.Errorf("%w: create the bucket first", err)
		}
	}
	return err
}

// Bucket is an s3:: location opened for object-level access: what the
// remote cache reads and writes under Prefix.
type Bucket struct {
	Client *s3.Client
	Name   string
	// Prefix is the key prefix without a trailing slash ("" for the
	// bucket's root).
	Prefix string
}

// OpenS3 opens an s3:: destination for object-level access, with the AWS
// SDK's standard credential chain. hc, when not nil, makes the requests
// (the remote cache's, with its timeouts); nil is the SDK's own client.
func (d *Destination) OpenS3(ctx context.Context, hc *http.Client) (*Bucket, error) {
	if d.Kind != KindS3 {
		return nil, fmt.Errorf("%s is not an s3:: location", d.URL)
	}
	cl, err := d.s3.client(ctx, func(o *s3.Options) {
		if hc != nil {
			o.HTTPClient = hc
		}
	})
	if err != nil {
		return nil, err
	}
	return &Bucket{Client: cl, Name: d.s3.bucket, Prefix: d.s3.prefix}, nil
}

// ExplainS3 adds what to do to S3 errors a user can fix (credentials, a
// missing bucket).
func ExplainS3(err error) error { return explainS3(err) }
