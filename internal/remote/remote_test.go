package remote

import (
	"strings"
	"testing"
)

func TestParseOCI(t *testing.T) {
	tests := []struct {
		raw       string
		insecure  bool
		ref       string // for target "q4km"
		plainHTTP bool
	}{
		{"oci://localhost:5000/edgepipe/demo:q4_k_m", false, "localhost:5000/edgepipe/demo:q4_k_m", true},
		{"oci://127.0.0.1:5000/demo", false, "127.0.0.1:5000/demo:q4km", true},
		{"oci://[::1]:5000/demo:v1", false, "[::1]:5000/demo:v1", true},
		{"oci://ghcr.io/acme/models:v1.2", false, "ghcr.io/acme/models:v1.2", false},
		{"oci://registry.lan:5000/models", true, "registry.lan:5000/models:q4km", true},
	}
	for _, tt := range tests {
		d, err := Parse(tt.raw, tt.insecure)
		if err != nil {
			t.Fatalf("%s: %v", tt.raw, err)
		}
		if got := d.Reference("q4km").String(); got != tt.ref {
			t.Errorf("%s: reference %s, want %s", tt.raw, got, tt.ref)
		}
		if d.PlainHTTP() != tt.plainHTTP {
			t.Errorf("%s: plain HTTP %v", tt.raw, d.PlainHTTP())
		}
	}
}

func TestParseS3(t *testing.T) {
	tests := []struct {
		raw                    string
		bucket, folder, region string
		endpoint               string
	}{
		{"s3::https://s3.amazonaws.com/models/releases/q4", "models", "releases/q4", "us-east-1", ""},
		{"s3::https://s3.eu-west-1.amazonaws.com/models/releases/", "models", "releases/q4km", "eu-west-1", ""},
		{"s3::https://models.s3.eu-west-1.amazonaws.com/releases/", "models", "releases/q4km", "eu-west-1", ""},
		{"s3::https://s3-us-west-2.amazonaws.com/models/", "models", "q4km", "us-west-2", ""},
		{"s3::http://127.0.0.1:9000/bucket/edge/", "bucket", "edge/q4km", "us-east-1", "http://127.0.0.1:9000"},
		{"s3::https://minio.lan/bucket/edge/q4?region=eu-central-1", "bucket", "edge/q4", "eu-central-1", "https://minio.lan"},
	}
	for _, tt := range tests {
		d, err := Parse(tt.raw, false)
		if err != nil {
			t.Fatalf("%s: %v", tt.raw, err)
		}
		l := d.s3
		if l.bucket != tt.bucket || l.folder("q4km") != tt.folder || l.region != tt.region || l.endpoint != tt.endpoint {
			t.Errorf("%s: bucket %q folder %q region %q endpoint %q", tt.raw, l.bucket, l.folder("q4km"), l.region, l.endpoint)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for raw, want := range map[string]string{
		"oci://user:pw@ghcr.io/a/b:c":                           "holds credentials",
		"oci://ghcr.io":                                         "names no repository",
		"oci://ghcr.io/Acme/Models:v1":                          "a repository is lowercase",
		"oci://ghcr.io/a/b@sha256:0000":                         "not a digest",
		"oci://ghcr.io/a/b:-bad":                                "is not a valid tag",
		"s3://bucket/key":                                       "go-getter's S3 form",
		"https://example.com/x":                                 "is not a destination",
		"s3::https://s3.amazonaws.com/b/p?aws_access_key_id=AK": "credentials in a recipe",
		"s3::https://k:s@minio.lan/b/p":                         "holds credentials",
		"s3::http://minio.lan/b/p":                              "plain http",
		"s3::https://minio.lan/":                                "names no bucket",
		"s3::https://minio.lan/b/p?version=3":                   "unknown query parameter",
		"s3::ftp://host/b/p":                                    "s3::https://HOST/BUCKET/PREFIX",
		"s3::ftp://k:s@host/b/p?aws_access_key_secret=AK":       "s3::https://HOST/BUCKET/PREFIX",
		// Presigned-URL and token parameters are credentials too.
		"s3::https://minio.lan/b/p?X-Amz-Signature=AK": "holds X-Amz-Signature",
		"oci://ghcr.io/a/b?token=AK":                   "not a digest, query or fragment",
	} {
		_, err := Parse(raw, false)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "pw@") || strings.Contains(err.Error(), "k:s@") || strings.Contains(err.Error(), "=AK")) {
			t.Errorf("%s: the error shows the credentials: %v", raw, err)
		}
	}
}
