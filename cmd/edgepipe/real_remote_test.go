package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/testseaweed"
)

// TestRealRemoteCacheDemo runs the demo with the real tools into a
// SeaweedFS remote cache (warm from the user cache when the demo ran
// before, else cold), then again from an empty local cache in read mode:
// every step is a remote hit, no tool runs, and the published models are
// byte-identical to the first run's.
func TestRealRemoteCacheDemo(t *testing.T) {
	run, work := realEdgepipe(t, "uv llama llamacpp seaweedfs")
	srv := testseaweed.StartT(t)
	for _, kv := range append(srv.Writer.Env(), "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE="+filepath.Join(work, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(work, "none")) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	recipe := filepath.Join(root, "recipes", "demo.yaml")
	url := srv.URL("demo")
	first := filepath.Join(work, "first")
	start := time.Now()
	log := run("run", "-j", "2", "--out", first, "--remote-cache", url, "--remote-cache-mode", "write", recipe)
	t.Logf("first run, %s:\n%s", time.Since(start).Round(time.Second), log)

	// An empty local cache that shares only the installed toolchains and
	// pinned downloads (keys name the tools' identities).
	fresh := filepath.Join(work, "fresh-cache")
	if err := os.MkdirAll(fresh, 0o755); err != nil {
		t.Fatal(err)
	}
	user := userCache(t)
	for _, d := range []string{"toolchains", "downloads", "uv"} {
		if err := os.Symlink(filepath.Join(user, d), filepath.Join(fresh, d)); err != nil {
			t.Fatal(err)
		}
	}
	second := filepath.Join(work, "second")
	start = time.Now()
	log = run("run", "-j", "2", "--cache-dir", fresh, "--out", second, "--remote-cache", url, "--remote-cache-mode", "read", recipe)
	t.Logf("from an empty local cache, %s:\n%s", time.Since(start).Round(time.Second), log)
	if m := regexp.MustCompile(`(?m) start +(\S+)`).FindAllSubmatch(log, -1); len(m) > 0 {
		for _, s := range m {
			if !strings.HasPrefix(string(s[1]), "publish:") {
				t.Errorf("step %s ran; every step should be a remote hit", s[1])
			}
		}
	}
	if !regexp.MustCompile(`: [1-9][0-9]* hits, 0 misses, 0 rejected`).Match(log) {
		t.Errorf("not all remote hits:\n%s", log)
	}
	for _, f := range []string{"laptop-q4km/model-q4_k_m.gguf", "laptop-q8/model-q8_0.gguf"} {
		a, err1 := os.ReadFile(filepath.Join(first, f))
		b, err2 := os.ReadFile(filepath.Join(second, f))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between the runs (%v, %v)", f, err1, err2)
		}
	}
	run("verify", filepath.Join(second, "laptop-q4km"), filepath.Join(second, "laptop-q8"))
}

func userCache(t *testing.T) string {
	if c := os.Getenv("EDGEPIPE_CACHE"); c != "" {
		return c
	}
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(base, "edgepipe")
}
