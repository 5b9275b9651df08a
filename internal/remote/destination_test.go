package remote

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/testregistry"
)

func mustParse(t *testing.T, raw string, insecure bool) *Destination {
	t.Helper()
	d, err := Parse(raw, insecure)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Where names the place a target lands; two pushes with the same Where
// replace each other.
func TestWhere(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"oci://ghcr.io/acme/models:v1", "oci://ghcr.io/acme/models:v1"},
		{"oci://ghcr.io/acme/models", "oci://ghcr.io/acme/models:q4km"},
		{"oci://127.0.0.1:5000/models", "oci://127.0.0.1:5000/models:q4km"},
		{"s3::https://minio.lan/bucket/edge/", "s3::https://minio.lan/bucket/edge/q4km/"},
		{"s3::https://minio.lan/bucket/edge/fixed", "s3::https://minio.lan/bucket/edge/fixed/"},
		{"s3::https://minio.lan/bucket", "s3::https://minio.lan/bucket/q4km/"},
		{"s3::https://s3.eu-west-1.amazonaws.com/bucket/a/", "s3::https://s3.eu-west-1.amazonaws.com/bucket/a/q4km/"},
	} {
		if got := mustParse(t, tc.raw, false).Where("q4km"); got != tc.want {
			t.Errorf("%s: Where = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

// Plain HTTP only on loopback, or where the recipe says the network is
// trusted.
func TestPlainHTTP(t *testing.T) {
	for _, tc := range []struct {
		raw      string
		insecure bool
		want     bool
	}{
		{"oci://localhost:5000/m", false, true},
		{"oci://127.0.0.1:5000/m", false, true},
		{"oci://127.0.0.1/m", false, true},
		{"oci://[::1]:5000/m", false, true},
		{"oci://registry.lan:5000/m", false, false},
		{"oci://10.0.0.1:5000/m", false, false},
		{"oci://registry.lan:5000/m", true, true},
		{"oci://ghcr.io/m", false, false},
	} {
		if got := mustParse(t, tc.raw, tc.insecure).PlainHTTP(); got != tc.want {
			t.Errorf("%s (insecure %v): PlainHTTP = %v, want %v", tc.raw, tc.insecure, got, tc.want)
		}
	}
	// s3:: over http is allowed without insecure only on loopback.
	for raw, ok := range map[string]bool{"s3::http://127.0.0.1:9000/b/p": true, "s3::http://localhost:9000/b/p": true, "s3::http://minio.lan/b/p": false} {
		if _, err := Parse(raw, false); (err == nil) != ok {
			t.Errorf("%s: %v", raw, err)
		}
	}
	if _, err := Parse("s3::http://minio.lan/b/p", true); err != nil {
		t.Errorf("insecure: true: %v", err)
	}
}

var pushedRE = regexp.MustCompile(`^oci://127\.0\.0\.1:\d+/edgepipe/demo:q4km@sha256:[0-9a-f]{64}$`)

// A push to a registry names the exact artifact it made; pulling it back
// gives the same, verified folder.
func TestPushPullOCI(t *testing.T) {
	reg := testregistry.StartT(t, testregistry.Options{})
	ctx := context.Background()
	dir := artifactFolder(t)
	d := mustParse(t, "oci://"+reg.Host+"/edgepipe/demo", false)
	res, err := d.Push(ctx, dir, "q4km")
	if err != nil {
		t.Fatal(err)
	}
	if !pushedRE.MatchString(res.Where) || res.Uploaded == 0 {
		t.Fatalf("push: %+v", res)
	}
	again, err := d.Push(ctx, dir, "q4km")
	if err != nil || again.Where != res.Where || again.Uploaded >= res.Uploaded {
		t.Errorf("second push: %+v, %v; want the same artifact with fewer uploads than %d", again, err, res.Uploaded)
	}

	dest := filepath.Join(t.TempDir(), "back")
	var staged string
	where, err := PullOCI(ctx, "oci://"+reg.Host+"/edgepipe/demo:q4km", dest, false, func(staging string) error {
		staged = staging
		return nil
	})
	if err != nil || where != res.Where {
		t.Fatalf("pull: %q, %v; want %q", where, err, res.Where)
	}
	if staged == "" {
		t.Error("the pulled folder was not offered for acceptance")
	}
	if ps, err := manifest.Verify(dest); err != nil || len(ps) > 0 {
		t.Errorf("pulled folder: %v %v", ps, err)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "model-q4_k_m.gguf"))
	if got, _ := os.ReadFile(filepath.Join(dest, "model-q4_k_m.gguf")); string(got) != string(want) {
		t.Error("the pulled model differs")
	}

	// A folder the caller refuses is not put in place.
	refused := filepath.Join(t.TempDir(), "refused")
	boom := errors.New("not this one")
	if _, err := PullOCI(ctx, "oci://"+reg.Host+"/edgepipe/demo:q4km", refused, false, func(string) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("refused pull: %v", err)
	}
	if _, err := os.Stat(refused); !os.IsNotExist(err) {
		t.Errorf("a refused pull left %s (%v)", refused, err)
	}
}

func TestPullOCIRefuses(t *testing.T) {
	for raw, want := range map[string]string{
		"s3::https://minio.lan/b/p": "only oci:// artifacts can be pulled",
		"oci://ghcr.io/acme/models": "names no tag: write oci://HOST/REPOSITORY:TAG",
		"https://example.com/x":     "is not a destination",
	} {
		_, err := PullOCI(context.Background(), raw, t.TempDir(), false, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}

func TestOCIRepository(t *testing.T) {
	repo, err := mustParse(t, "oci://127.0.0.1:5000/edgepipe/cache", false).OCIRepository(nil)
	if err != nil || repo.Reference.Repository != "edgepipe/cache" || !repo.PlainHTTP {
		t.Errorf("%+v, %v", repo, err)
	}
	if _, err := mustParse(t, "oci://ghcr.io/acme/cache:v1", false).OCIRepository(nil); err == nil || !strings.Contains(err.Error(), "names a tag: a remote cache is a repository") {
		t.Errorf("tag: %v", err)
	}
	if _, err := mustParse(t, "s3::https://minio.lan/b/p", false).OCIRepository(nil); err == nil || !strings.Contains(err.Error(), "is not an oci:// location") {
		t.Errorf("s3: %v", err)
	}
}

func TestOpenS3(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	b, err := mustParse(t, "s3::https://minio.lan/models/edge/cache/", false).OpenS3(context.Background(), nil)
	if err != nil || b.Name != "models" || b.Prefix != "edge/cache" || b.Client == nil {
		t.Errorf("%+v, %v", b, err)
	}
	if _, err := mustParse(t, "oci://ghcr.io/a/b", false).OpenS3(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "is not an s3:: location") {
		t.Errorf("oci: %v", err)
	}
}

func TestExplainS3(t *testing.T) {
	for code, want := range map[string]string{
		"AccessDenied":          "give the AWS SDK credentials that may write there",
		"InvalidAccessKeyId":    "give the AWS SDK credentials that may write there",
		"SignatureDoesNotMatch": "give the AWS SDK credentials that may write there",
		"ExpiredToken":          "give the AWS SDK credentials that may write there",
		"NoSuchBucket":          "create the bucket first",
		"SlowDown":              "",
	} {
		api := &smithy.GenericAPIError{Code: code, Message: "m"}
		err := ExplainS3(api)
		if !errors.Is(err, api) {
			t.Errorf("%s: the explanation lost the error: %v", code, err)
		}
		if want == "" && err != error(api) || want != "" && !strings.Contains(err.Error(), ": "+want) {
			t.Errorf("%s: %v, want it to say %q", code, err, want)
		}
	}
	plain := errors.New("connection refused")
	if ExplainS3(plain) != plain {
		t.Error("an error that is not the API's was changed")
	}
}

// A destination of no known kind cannot be pushed to.
func TestPushUnknownKind(t *testing.T) {
	d := &Destination{URL: "ftp://x", Kind: "ftp"}
	if _, err := d.Push(context.Background(), t.TempDir(), "t"); err == nil || !strings.Contains(err.Error(), `unknown kind "ftp"`) {
		t.Errorf("%v", err)
	}
}
