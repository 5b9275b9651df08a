package remotecache

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/remote"
)

type fileDigest = digest.FileDigest

// s3Backend stores objects in an S3 bucket under a prefix.
type s3Backend struct {
	b   *remote.Bucket
	url string
}

func (s *s3Backend) String() string { return s.url }

func (s *s3Backend) key(name string) string {
	if s.b.Prefix == "" {
		return name
	}
	return path.Join(s.b.Prefix, name)
}

func (s *s3Backend) get(ctx context.Context, name string, limit int64) (obj, error) {
	out, err := s.b.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.b.Name, Key: aws.String(s.key(name))})
	if err != nil {
		if isNotFound(err) {
			return nil, errNotFound
		}
		return nil, remote.ExplainS3(err)
	}
	if n := aws.ToInt64(out.ContentLength); limit >= 0 && n > limit+1 {
		out.Body.Close()
		return nil, fmt.Errorf("the object is %d bytes, more than the %d expected", n, limit)
	}
	return out.Body, nil
}

func (s *s3Backend) exists(ctx context.Context, name string, size int64) (bool, error) {
	head, err := s.b.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.b.Name, Key: aws.String(s.key(name))})
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, remote.ExplainS3(err)
	}
	return size < 0 || aws.ToInt64(head.ContentLength) == size, nil
}

// put writes the object with its SHA-256 (S3 checks it on receipt; it is
// also kept as metadata, as not every S3-compatible store keeps
// checksums). With ifAbsent the write is conditional (If-None-Match: *):
// a store that already has the name answers 412 and keeps its object.
func (s *s3Backend) put(ctx context.Context, name string, f io.ReadSeeker, size int64, sha256Hex string, ifAbsent bool) error {
	sum, err := hex.DecodeString(sha256Hex)
	if err != nil {
		return err
	}
	in := &s3.PutObjectInput{
		Bucket: &s.b.Name, Key: aws.String(s.key(name)), Body: f, ContentLength: aws.Int64(size),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum)),
		Metadata:       map[string]string{"sha256": sha256Hex},
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err = s.b.Client.PutObject(ctx, in)
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && (ae.ErrorCode() == "PreconditionFailed" || ae.ErrorCode() == "ConditionalRequestConflict") {
			return errExists
		}
		return remote.ExplainS3(err)
	}
	return nil
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "NoSuchKey" || ae.ErrorCode() == "NotFound")
}
