package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/testseaweed"
)

// TestRealRemoteCacheDemo runs the demo with the real tools into a
// SeaweedFS remote cache (warm from the user cache when the demo ran
// before, else cold), then again from an empty local cache in read mode:
// every step is a remote hit, no tool runs, and the published models are
// byte-identical to the first run's. Then one step runs as a job from the
// plan's bundle on an empty "worker" cache, and an orchestrator finds it.
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
	user := userCache(t)
	fresh := linkedCache(t, filepath.Join(work, "fresh-cache"), user)
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
	for _, f := range []string{"laptop-q4km/smollm2-135m-q4_k_m.gguf", "laptop-q8/smollm2-135m-q8_0.gguf"} {
		a, err1 := os.ReadFile(filepath.Join(first, f))
		b, err2 := os.ReadFile(filepath.Join(second, f))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between the runs (%v, %v)", f, err1, err2)
		}
	}
	run("verify", filepath.Join(second, "laptop-q4km"), filepath.Join(second, "laptop-q8"))

	// A step job on a "worker": the plan's bundle, an empty local cache,
	// and a remote that lacks the step's output (its record removed). The
	// step fetches its input from the remote, runs the real llama-quantize
	// and shares its output, which an orchestrator then finds.
	bundle := filepath.Join(work, "demo.tar")
	run("plan", "--bundle", bundle, recipe)
	dropRecord(t, srv, fresh, "gguf-quantize:q8_0")
	// The second run's cache and models have served their purpose: free
	// their gigabytes before the worker and the orchestrator fetch theirs
	// (this test once ran a CI machine's disk full).
	for _, dir := range []string{fresh, second} {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	worker := linkedCache(t, filepath.Join(work, "worker-cache"), user)
	start = time.Now()
	log = run("step", "run", bundle, "gguf-quantize:q8_0", "--cache-dir", worker, "--remote-cache", url)
	t.Logf("step run on a worker, %s:\n%s", time.Since(start).Round(time.Second), log)
	for _, want := range []string{`done +gguf-quantize:q8_0`, `note +gguf-convert:f16: fetched from the remote cache`, `uploaded [1-9][0-9]* objects \([0-9]+ bytes\), 1 records`} {
		if !regexp.MustCompile(want).Match(log) {
			t.Errorf("step run: no %q in its output", want)
		}
	}
	third := filepath.Join(work, "third")
	log = run("run", "--cache-dir", linkedCache(t, filepath.Join(work, "orchestrator-cache"), user), "--out", third,
		"--remote-cache", url, "--remote-cache-mode", "read", recipe)
	if !regexp.MustCompile(`cached +gguf-quantize:q8_0 \(cached, remote cache\)`).Match(log) {
		t.Errorf("the worker's output is not a remote hit:\n%s", log)
	}
	a, _ := os.ReadFile(filepath.Join(first, "laptop-q8/smollm2-135m-q8_0.gguf"))
	if b, err := os.ReadFile(filepath.Join(third, "laptop-q8/smollm2-135m-q8_0.gguf")); err != nil || !bytes.Equal(a, b) {
		t.Errorf("the worker's Q8_0 model differs from the local run's (%v)", err)
	}
}

// linkedCache makes an empty cache folder that shares only the user
// cache's installed toolchains and pinned downloads.
func linkedCache(t *testing.T, dir, user string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"toolchains", "downloads", "uv"} {
		if err := os.Symlink(filepath.Join(user, d), filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// dropRecord removes the remote record of a step, found by its key in a
// cache that holds the step's entry.
func dropRecord(t *testing.T, srv *testseaweed.Server, cacheDir, step string) {
	t.Helper()
	ents, err := filepath.Glob(filepath.Join(cacheDir, "entries", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ents {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(`"step_id": "`+step+`"`)) {
			continue
		}
		key := "demo/ac/" + strings.TrimSuffix(filepath.Base(p), ".json") + ".json"
		cl := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(srv.Writer.AccessKey, srv.Writer.SecretKey, "")})
		if _, err := cl.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: &srv.Bucket, Key: &key}); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no cache entry of %s in %s", step, cacheDir)
}

// userCache is the cache the edgepipe under test uses.
func userCache(t *testing.T) string {
	c, err := cache.Root(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
