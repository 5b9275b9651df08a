package shellpeer

import (
	"strings"
	"testing"
)

func TestRewriteCachePath(t *testing.T) {
	key := strings.Repeat("ab", 32)
	other := strings.Repeat("cd", 32)
	produced := map[string]bool{key: true}
	for in, want := range map[string]string{
		"/c/tmp/" + key + ".123.456/model-f16.gguf": "/peer/" + key + "/model-f16.gguf",
		"--outfile=/c/tmp/" + key + ".1.2/out.gguf": "--outfile=/peer/" + key + "/out.gguf",
		"/c/objects/" + key + "/model-f16.gguf":     "/peer/" + key + "/model-f16.gguf",
		"/c/objects/" + other + "/config.json":      "/c/objects/" + other + "/config.json", // not made by the script
		"/tmp/notakey/file":                         "/tmp/notakey/file",
		"-c":                                        "-c",
	} {
		if got := rewriteCachePath(in, "/peer", produced); got != want {
			t.Errorf("rewrite %s = %s, want %s", in, got, want)
		}
	}
}
