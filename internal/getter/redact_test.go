package getter

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for src, want := range map[string]string{
		"https://example.com/m.tar.gz?checksum=sha256:ab":               "https://example.com/m.tar.gz?checksum=sha256:ab",
		"git::https://example.com/m.git?ref=main":                       "git::https://example.com/m.git?ref=main",
		"https://user:hunter22@example.com/m.tar.gz":                    "https://user:redacted@example.com/m.tar.gz",
		"s3::https://s3.amazonaws.com/b/m.tgz?aws_access_key_secret=K1": "s3::https://s3.amazonaws.com/b/m.tgz?aws_access_key_secret=redacted",
		"https://example.com/m.gguf?X-Amz-Signature=SIG99&a=1":          "https://example.com/m.gguf?X-Amz-Signature=redacted&a=1",
		"builtin:smollm2-135m":                                          "builtin:smollm2-135m",
		"hf://org/name@main":                                            "hf://org/name@main",
		"./model":                                                       "./model",
		"https://user:hunter22@example.com/m%zz":                        "https://redacted@example.com/m%zz",
	} {
		got := Redact(src)
		if got != want {
			t.Errorf("Redact(%q) = %q, want %q", src, got, want)
		}
		for _, secret := range []string{"hunter22", "K1", "SIG99"} {
			if strings.Contains(got, secret) {
				t.Errorf("Redact(%q) kept %s", src, secret)
			}
		}
	}
}
