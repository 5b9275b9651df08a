package remote

// The S3 round trip runs against gofakes3, an S3 API server written in Go
// and run here in-process on loopback. It speaks the S3 REST protocol the
// AWS SDK uses (path-style PUT, HEAD, LIST, GET), so this tests edgepipe's
// requests and key layout end to end, and the download goes through
// go-getter's S3 getter (edgepipe's source fetcher) like a user's would. It
// does not check request signatures or AWS-only behaviour.

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/edgepipe/edgepipe/internal/getter"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/provenance"
)

func startS3(t *testing.T, buckets ...string) string {
	t.Helper()
	backend := s3mem.New()
	for _, b := range buckets {
		if err := backend.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: gofakes3.New(backend).Server(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	// Credentials for the SDK's chain (the server does not check them),
	// and nothing read from this machine's AWS setup.
	t.Setenv("AWS_ACCESS_KEY_ID", "edgepipe-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "edgepipe-test-secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return ln.Addr().String()
}

func artifactFolder(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "q4km")
	for rel, body := range map[string]string{
		"model-q4_k_m.gguf":      strings.Repeat("weights ", 500),
		"logs/gguf-quantize.log": "quantize: ok\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := &manifest.Manifest{EdgepipeVersion: "test", Recipe: manifest.Recipe{Name: "demo"},
		Target: manifest.Target{Name: "q4km", Device: "x86-laptop", Format: "gguf-q4_k_m"}, Source: manifest.Source{URI: "./model"}}
	if err := manifest.Write(dir, m); err != nil {
		t.Fatal(err)
	}
	st, err := provenance.New(dir, m, provenance.Run{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := provenance.Write(dir, st, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestS3RoundTrip(t *testing.T) {
	host := startS3(t, "models")
	ctx := context.Background()
	dir := artifactFolder(t)
	d, err := Parse("s3::http://"+host+"/models/edge/", false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Push(ctx, dir, "q4km")
	if err != nil {
		t.Fatal(err)
	}
	// Two files, manifest.json, provenance.intoto.json.
	if res.Uploaded != 4 || res.Where != "s3::http://"+host+"/models/edge/q4km/" {
		t.Fatalf("push: %+v", res)
	}
	// Again: every object already holds those bytes.
	again, err := d.Push(ctx, dir, "q4km")
	if err != nil {
		t.Fatal(err)
	}
	if again.Uploaded != 0 {
		t.Fatalf("second push uploaded %d objects", again.Uploaded)
	}

	// Back through go-getter, as a recipe source would read it.
	dest := filepath.Join(t.TempDir(), "back")
	if _, err := getter.Fetch(ctx, "s3::http://"+host+"/models/edge/q4km", dest, getter.Options{}); err != nil {
		t.Fatal(err)
	}
	if ps, err := manifest.Verify(dest); err != nil || len(ps) > 0 {
		t.Fatalf("downloaded folder: %v %v", ps, err)
	}
	pr, err := provenance.Check(dest, nil)
	if err != nil || !pr.HasProvenance || len(pr.Problems) > 0 {
		t.Fatalf("downloaded provenance: %+v %v", pr, err)
	}

	// A missing bucket fails with what to do.
	d, _ = Parse("s3::http://"+host+"/absent/edge/", false)
	if _, err := d.Push(ctx, dir, "q4km"); err == nil || !strings.Contains(err.Error(), "create the bucket first") {
		t.Fatalf("push to a missing bucket: %v", err)
	}
}
