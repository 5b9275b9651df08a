package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/edgepipe/edgepipe/internal/testseaweed"
)

// seaweedKey finds the script's SeaweedFS server in its Values.
type seaweedKey struct{}

type seaweedHolder struct{ s *testseaweed.Server }

// seaweedCondition is [seaweed]: the seaweedfs toolchain is installed.
// The real tier (EDGEPIPE_REAL=1) requires it: there its absence fails.
func seaweedCondition() (bool, error) {
	if _, err := testseaweed.Weed(); err != nil {
		if os.Getenv("EDGEPIPE_REAL") == "1" {
			return false, err
		}
		return false, nil
	}
	return true, nil
}

// seaweedCmd runs a real SeaweedFS S3 server for the script:
//
//	seaweed start           start it; $REMOTE is an s3:: URL in its bucket, and
//	                        the AWS variables hold its writer's credentials
//	seaweed reader          switch the AWS variables to its read-only identity
//	seaweed corrupt STEP FILE
//	                        flip a byte of the object the remote record of STEP
//	                        lists for FILE (same size, another digest)
func seaweedCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: seaweed start|reader|corrupt STEP FILE")
	}
	h := ts.Value(seaweedKey{}).(*seaweedHolder)
	switch args[0] {
	case "start":
		weed, err := testseaweed.Weed()
		ts.Check(err)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		dir, err := os.MkdirTemp("", "seaweed-")
		ts.Check(err)
		s, err := testseaweed.Start(ctx, weed, dir)
		ts.Check(err)
		h.s = s
		ts.Defer(func() { s.Close(); os.RemoveAll(dir) })
		ts.Setenv("REMOTE", s.URL("cache"))
		setCreds(ts, s.Writer)
		// Nothing else the AWS SDK might read: no shared files, no
		// instance metadata service.
		ts.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
		ts.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
		ts.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	case "reader":
		setCreds(ts, h.s.Reader)
	case "corrupt":
		if len(args) != 3 || h.s == nil {
			ts.Fatalf("usage: seaweed corrupt STEP FILE (after seaweed start)")
		}
		corruptRemote(ts, h.s, args[1], args[2])
	default:
		ts.Fatalf("usage: seaweed start|reader|corrupt STEP FILE")
	}
}

func setCreds(ts *testscript.TestScript, c testseaweed.Credentials) {
	ts.Setenv("AWS_ACCESS_KEY_ID", c.AccessKey)
	ts.Setenv("AWS_SECRET_ACCESS_KEY", c.SecretKey)
}

func corruptRemote(ts *testscript.TestScript, srv *testseaweed.Server, step, file string) {
	ctx := context.Background()
	cl := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.Writer.AccessKey, srv.Writer.SecretKey, "")})
	list, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &srv.Bucket, Prefix: aws.String("cache/ac/")})
	ts.Check(err)
	for _, o := range list.Contents {
		env := struct{ Payload string }{}
		rec := struct {
			StepID string `json:"step_id"`
			Tree   struct {
				Files []struct{ Path, SHA256 string }
			}
		}{}
		ts.Check(json.Unmarshal(get(ts, cl, srv.Bucket, *o.Key), &env))
		payload, err := base64.StdEncoding.DecodeString(env.Payload)
		ts.Check(err)
		ts.Check(json.Unmarshal(payload, &rec))
		if rec.StepID != step {
			continue
		}
		for _, f := range rec.Tree.Files {
			if f.Path == file {
				key := "cache/cas/sha256/" + f.SHA256
				b := get(ts, cl, srv.Bucket, key)
				b[len(b)/2] ^= 0xff
				_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: &srv.Bucket, Key: &key, Body: bytes.NewReader(b)})
				ts.Check(err)
				return
			}
		}
		ts.Fatalf("the remote record of %s lists no %s", step, file)
	}
	ts.Fatalf("no remote record of step %s", step)
}

func get(ts *testscript.TestScript, cl *s3.Client, bucket, key string) []byte {
	out, err := cl.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	ts.Check(err)
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	ts.Check(err)
	return b
}

// TestRealSeaweedInstalled: the remote-cache scripts and tests skip where
// SeaweedFS is not installed; the real tier, which CI runs after
// installing every toolchain, fails instead, so CI never passes without
// them having run.
func TestRealSeaweedInstalled(t *testing.T) {
	realTier(t)
	if _, err := testseaweed.Weed(); err != nil {
		t.Fatalf("the real tier needs SeaweedFS (`edgepipe toolchain install seaweedfs`, which `go tool task toolchains` runs): %v", err)
	}
}
