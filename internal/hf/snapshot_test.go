package hf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const testToken = "hf_TestTokenThatMustNeverLeak123"

func testClient(t *testing.T, h *fakeHub) *Client {
	t.Helper()
	return &Client{Endpoint: h.hub.URL, CacheDir: t.TempDir(), Token: testToken, Parallel: 3}
}

func modelFiles() map[string][]byte {
	return map[string][]byte{
		"config.json":             []byte(`{"model_type": "llama", "hidden_size": 576}`),
		"tokenizer.json":          []byte(`{"version": "1.0"}`),
		"model.safetensors":       randomBytes(300_000),
		"onnx/nested/notes.txt":   []byte("nested small file\n"),
		"onnx/nested/model.onnx":  randomBytes(50_000),
		"generation_config.json":  []byte(`{"do_sample": false}`),
		"special_tokens_map.json": []byte(`{}`),
	}
}

func mustParse(t *testing.T, s string) Repo {
	t.Helper()
	r, err := ParseURI(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readThrough(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSnapshotWritesHuggingFaceCacheLayout(t *testing.T) {
	h := newFakeHub(t)
	files := modelFiles()
	fr := h.addRepo(TypeModel, "org/tiny", files, "model.safetensors", "onnx/nested/model.onnx")
	c := testClient(t, h)

	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(c.CacheDir, "models--org--tiny")
	if snap.Commit != fr.commit || snap.Dir != filepath.Join(root, "snapshots", fr.commit) {
		t.Fatalf("commit %s dir %s, want %s under %s", snap.Commit, snap.Dir, fr.commit, root)
	}
	if len(snap.Files) != len(files) {
		t.Fatalf("got %d files, want %d", len(snap.Files), len(files))
	}
	for _, f := range snap.Files {
		content := files[f.Path]
		wantEtag := gitBlobID(content)
		wantSHA := ""
		if fr.lfs[f.Path] {
			wantEtag, wantSHA = sha256Hex(content), sha256Hex(content)
		}
		if f.SHA256 != wantSHA || f.Size != int64(len(content)) || f.BlobPath != filepath.Join(root, "blobs", wantEtag) {
			t.Errorf("%s: got %+v, want sha256 %q size %d blob %s", f.Path, f, wantSHA, len(content), wantEtag)
		}
		pointer := filepath.Join(snap.Dir, filepath.FromSlash(f.Path))
		target, err := os.Readlink(pointer)
		if err != nil {
			t.Fatalf("%s is not a symlink: %v", f.Path, err)
		}
		wantTarget := strings.Repeat("../", strings.Count(f.Path, "/")+2) + "blobs/" + wantEtag
		if target != wantTarget {
			t.Errorf("%s links to %s, want %s", f.Path, target, wantTarget)
		}
		if got := readThrough(t, pointer); string(got) != string(content) {
			t.Errorf("%s: content differs", f.Path)
		}
	}
	ref, err := os.ReadFile(filepath.Join(root, "refs", "main"))
	if err != nil || string(ref) != fr.commit {
		t.Fatalf("refs/main = %q (%v), want exactly %q", ref, err, fr.commit)
	}
	leftovers, _ := filepath.Glob(filepath.Join(root, "blobs", "*.incomplete"))
	if len(leftovers) != 0 {
		t.Fatalf("incomplete files left: %v", leftovers)
	}
	if _, err := os.Stat(filepath.Join(c.CacheDir, ".locks", "models--org--tiny", sha256Hex(files["model.safetensors"])+".lock")); err != nil {
		t.Fatalf("lock file not where huggingface_hub puts it: %v", err)
	}

	// A second snapshot of a cached commit asks the Hub for the commit only.
	before := len(h.seen())
	served := h.bytesServed("model.safetensors")
	again, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny@main"), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(h.seen()) - before; n != 1 {
		t.Fatalf("cached snapshot made %d requests, want 1 (the revision lookup)", n)
	}
	if h.bytesServed("model.safetensors") != served || len(again.Files) != len(snap.Files) {
		t.Fatal("cached snapshot downloaded again")
	}
}

func TestSnapshotAtCommitWritesNoRef(t *testing.T) {
	h := newFakeHub(t)
	fr := h.addRepo(TypeModel, "org/tiny", modelFiles(), "model.safetensors")
	c := testClient(t, h)
	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny@"+fr.commit), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Commit != fr.commit {
		t.Fatalf("commit %s, want %s", snap.Commit, fr.commit)
	}
	if _, err := os.Stat(filepath.Join(c.CacheDir, "models--org--tiny", "refs")); !os.IsNotExist(err) {
		t.Fatalf("a commit revision must not create refs/: %v", err)
	}
}

func TestDatasetRepoUsesDatasetPathsAndFolder(t *testing.T) {
	h := newFakeHub(t)
	h.addRepo(TypeDataset, "org/texts", map[string][]byte{"data/train.txt": []byte("hello\n")})
	c := testClient(t, h)
	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://datasets/org/texts"), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(snap.Dir, "datasets--org--texts") {
		t.Fatalf("dataset snapshot in %s", snap.Dir)
	}
	if got := readThrough(t, filepath.Join(snap.Dir, "data", "train.txt")); string(got) != "hello\n" {
		t.Fatalf("content %q", got)
	}
}

func TestAllowAndIgnorePatternsSelectFiles(t *testing.T) {
	h := newFakeHub(t)
	h.addRepo(TypeModel, "org/tiny", modelFiles(), "model.safetensors", "onnx/nested/model.onnx")
	c := testClient(t, h)
	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{
		AllowPatterns:  []string{"*.json", "*.safetensors", "onnx/"},
		IgnorePatterns: []string{"*.onnx"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range snap.Files {
		got = append(got, f.Path)
	}
	want := "config.json generation_config.json model.safetensors onnx/nested/notes.txt special_tokens_map.json tokenizer.json"
	if strings.Join(got, " ") != want {
		t.Fatalf("selected %v, want %s", got, want)
	}
	if h.bytesServed("onnx/nested/model.onnx") != 0 {
		t.Fatal("an ignored file was downloaded")
	}
}

func TestInterruptedDownloadResumesWithoutRefetching(t *testing.T) {
	h := newFakeHub(t)
	files := modelFiles()
	h.addRepo(TypeModel, "org/tiny", files, "model.safetensors")
	const cut = 123_456
	h.cutAfter["model.safetensors"] = cut
	c := testClient(t, h)
	var logs []string
	var mu sync.Mutex
	c.Logf = func(format string, args ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}

	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{AllowPatterns: []string{"model.safetensors"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := readThrough(t, filepath.Join(snap.Dir, "model.safetensors")); string(got) != string(files["model.safetensors"]) {
		t.Fatal("resumed file differs from the original")
	}
	size := int64(len(files["model.safetensors"]))
	if served := h.bytesServed("model.safetensors"); served != size {
		t.Fatalf("server sent %d bytes for a %d-byte file: finished bytes were fetched again", served, size)
	}
	sum := sha256Hex(files["model.safetensors"])
	var resumed bool
	for _, r := range h.seen() {
		if r.Server == "cdn" && r.Range == fmt.Sprintf("bytes=%d-", cut) && r.IfRange == `"`+sum+`"` {
			resumed = true
		}
	}
	if !resumed {
		t.Fatalf("no Range+If-Range request from byte %d: %+v", cut, h.seen())
	}
	if !strings.Contains(strings.Join(logs, "\n"), fmt.Sprintf("resuming model.safetensors at byte %d", cut)) {
		t.Fatalf("resume not logged: %q", logs)
	}
}

// partial writes the first n bytes of a file as huggingface_hub's
// <etag>.incomplete, as an earlier interrupted run leaves it.
func partial(t *testing.T, c *Client, repo, etag string, data []byte) {
	t.Helper()
	dir := filepath.Join(c.CacheDir, repo, "blobs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, etag+".incomplete"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPartialFileFromEarlierRunIsResumed(t *testing.T) {
	h := newFakeHub(t)
	files := modelFiles()
	h.addRepo(TypeModel, "org/tiny", files, "model.safetensors")
	c := testClient(t, h)
	content := files["model.safetensors"]
	partial(t, c, "models--org--tiny", sha256Hex(content), content[:200_000])

	if _, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{AllowPatterns: []string{"model.safetensors"}}); err != nil {
		t.Fatal(err)
	}
	if served, want := h.bytesServed("model.safetensors"), int64(len(content)-200_000); served != want {
		t.Fatalf("server sent %d bytes, want only the missing %d", served, want)
	}
}

func TestServerIgnoringRangeRestartsFromZero(t *testing.T) {
	h := newFakeHub(t)
	files := modelFiles()
	h.addRepo(TypeModel, "org/tiny", files, "model.safetensors")
	h.ignoreRange = true
	c := testClient(t, h)
	content := files["model.safetensors"]
	partial(t, c, "models--org--tiny", sha256Hex(content), content[:200_000])

	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{AllowPatterns: []string{"model.safetensors"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := readThrough(t, filepath.Join(snap.Dir, "model.safetensors")); string(got) != string(content) {
		t.Fatal("a 200 answer to a Range request was appended to the partial file")
	}
}

func TestCorruptDownloadIsRejectedAndDeleted(t *testing.T) {
	h := newFakeHub(t)
	files := modelFiles()
	h.addRepo(TypeModel, "org/tiny", files, "model.safetensors")
	h.corrupt["model.safetensors"] = true
	c := testClient(t, h)

	_, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{})
	if err == nil || !strings.Contains(err.Error(), "model.safetensors is corrupt") || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("want a sha256 corruption error, got %v", err)
	}
	sum := sha256Hex(files["model.safetensors"])
	for _, p := range []string{
		filepath.Join(c.CacheDir, "models--org--tiny", "blobs", sum),
		filepath.Join(c.CacheDir, "models--org--tiny", "blobs", sum+".incomplete"),
	} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists after a failed verification", p)
		}
	}
	if _, err := os.Lstat(filepath.Join(c.CacheDir, "models--org--tiny", "refs", "main")); !os.IsNotExist(err) {
		t.Error("refs/main written for a failed snapshot")
	}
}

func TestCorruptSmallFileIsRejected(t *testing.T) {
	h := newFakeHub(t)
	h.addRepo(TypeModel, "org/tiny", modelFiles(), "model.safetensors")
	h.corrupt["tokenizer.json"] = true
	c := testClient(t, h)
	_, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{})
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json is corrupt") || !strings.Contains(err.Error(), "git blob sha1") {
		t.Fatalf("want a git blob sha1 corruption error, got %v", err)
	}
}

func TestCorruptPartialFileIsDownloadedAgain(t *testing.T) {
	h := newFakeHub(t)
	files := modelFiles()
	h.addRepo(TypeModel, "org/tiny", files, "model.safetensors")
	c := testClient(t, h)
	content := files["model.safetensors"]
	bad := randomBytes(100_000)
	partial(t, c, "models--org--tiny", sha256Hex(content), bad)

	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{AllowPatterns: []string{"model.safetensors"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := readThrough(t, filepath.Join(snap.Dir, "model.safetensors")); string(got) != string(content) {
		t.Fatal("content differs")
	}
	if served, want := h.bytesServed("model.safetensors"), int64(len(content)-100_000+len(content)); served != want {
		t.Fatalf("served %d bytes, want %d (the resumed tail, then the whole file)", served, want)
	}
}

func TestConcurrentSnapshotsDownloadEachBlobOnce(t *testing.T) {
	h := newFakeHub(t)
	files := modelFiles()
	h.addRepo(TypeModel, "org/tiny", files, "model.safetensors")
	cache := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &Client{Endpoint: h.hub.URL, CacheDir: cache}
			_, errs[i] = c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{AllowPatterns: []string{"model.safetensors"}})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if served, size := h.bytesServed("model.safetensors"), int64(len(files["model.safetensors"])); served != size {
		t.Fatalf("served %d bytes for a %d-byte blob", served, size)
	}
}

func TestPickleWeightsAreRefusedUnlessAllowed(t *testing.T) {
	h := newFakeHub(t)
	h.addRepo(TypeModel, "org/old", map[string][]byte{
		"config.json":       []byte(`{}`),
		"pytorch_model.bin": randomBytes(1000),
	}, "pytorch_model.bin")
	c := testClient(t, h)

	_, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/old"), SnapshotOptions{})
	if err == nil || !strings.Contains(err.Error(), "pytorch_model.bin") || !strings.Contains(err.Error(), "`model.allow_pickle: true`") {
		t.Fatalf("want a refusal naming the file and the recipe key, got %v", err)
	}
	if h.bytesServed("pytorch_model.bin") != 0 {
		t.Fatal("a refused pickle file was downloaded")
	}

	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/old"), SnapshotOptions{AllowPickle: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Files) != 2 {
		t.Fatalf("allowed pickle snapshot has %d files", len(snap.Files))
	}
}

func TestPickleCopiesBesideSafetensorsAreSkipped(t *testing.T) {
	h := newFakeHub(t)
	files := modelFiles()
	files["pytorch_model.bin"] = randomBytes(1000)
	files["training_args.bin"] = randomBytes(100)
	h.addRepo(TypeModel, "org/both", files, "model.safetensors", "pytorch_model.bin")
	c := testClient(t, h)
	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/both"), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(snap.Skipped, ",") != "pytorch_model.bin,training_args.bin" {
		t.Fatalf("skipped %v", snap.Skipped)
	}
	for _, f := range snap.Files {
		if isPickle(f.Path) {
			t.Fatalf("pickle file %s in snapshot", f.Path)
		}
	}
	if h.bytesServed("pytorch_model.bin")+h.bytesServed("training_args.bin") != 0 {
		t.Fatal("skipped pickle files were downloaded")
	}
}

func TestRemoteCodeIsRefusedUnlessTrusted(t *testing.T) {
	h := newFakeHub(t)
	files := modelFiles()
	files["modeling_custom.py"] = []byte("import os\n")
	h.addRepo(TypeModel, "org/code", files, "model.safetensors")
	automap := modelFiles()
	automap["config.json"] = []byte(`{"auto_map": {"AutoModel": "other/repo--modeling.Model"}}`)
	h.addRepo(TypeModel, "org/automap", automap, "model.safetensors")
	c := testClient(t, h)

	_, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/code"), SnapshotOptions{})
	if err == nil || !strings.Contains(err.Error(), "modeling_custom.py") || !strings.Contains(err.Error(), "`model.trust_remote_code: true`") {
		t.Fatalf("want a refusal naming the .py file and the recipe key, got %v", err)
	}
	_, err = c.Snapshot(context.Background(), mustParse(t, "hf://org/automap"), SnapshotOptions{})
	if err == nil || !strings.Contains(err.Error(), "config.json declares auto_map") || !strings.Contains(err.Error(), "`model.trust_remote_code: true`") {
		t.Fatalf("want an auto_map refusal, got %v", err)
	}
	if h.bytesServed("model.safetensors") != 0 {
		t.Fatal("weights were downloaded for a refused repository")
	}
	for _, id := range []string{"org/code", "org/automap"} {
		if _, err := c.Snapshot(context.Background(), mustParse(t, "hf://"+id), SnapshotOptions{TrustRemoteCode: true}); err != nil {
			t.Fatalf("%s with trust_remote_code: %v", id, err)
		}
	}
}

func TestOfflineUsesCacheOnly(t *testing.T) {
	h := newFakeHub(t)
	files := modelFiles()
	fr := h.addRepo(TypeModel, "org/tiny", files, "model.safetensors")
	online := testClient(t, h)
	// The offline client points at a dead endpoint: any request would fail.
	offline := &Client{Endpoint: "http://127.0.0.1:1", CacheDir: online.CacheDir, Offline: true}

	_, err := offline.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{})
	if err == nil || !strings.Contains(err.Error(), "not in the Hugging Face cache") || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") {
		t.Fatalf("want a clear offline error before any download, got %v", err)
	}

	want, err := online.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := offline.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wj, _ := json.Marshal(want)
	gj, _ := json.Marshal(got)
	if string(wj) != string(gj) {
		t.Fatalf("offline snapshot differs:\n online %s\noffline %s", wj, gj)
	}
	byCommit, err := offline.Snapshot(context.Background(), mustParse(t, "hf://org/tiny@"+fr.commit), SnapshotOptions{AllowPatterns: []string{"*.safetensors"}})
	if err != nil || len(byCommit.Files) != 1 || byCommit.Files[0].SHA256 != sha256Hex(files["model.safetensors"]) {
		t.Fatalf("offline by commit: %+v, %v", byCommit, err)
	}
	if _, err := offline.Snapshot(context.Background(), mustParse(t, "hf://org/tiny@v2"), SnapshotOptions{}); err == nil || !strings.Contains(err.Error(), "no refs/v2") {
		t.Fatalf("want a missing-ref error, got %v", err)
	}
}

func TestRevisionWithoutSHAFallsBackToResolveHeader(t *testing.T) {
	h := newFakeHub(t)
	fr := h.addRepo(TypeModel, "org/tiny", modelFiles(), "model.safetensors")
	h.omitSHA = true
	c := testClient(t, h)
	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{AllowPatterns: []string{"config.json"}})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Commit != fr.commit {
		t.Fatalf("commit %s, want %s from X-Repo-Commit", snap.Commit, fr.commit)
	}
}

func TestUnsafeFileNamesFromTheHubAreRefused(t *testing.T) {
	h := newFakeHub(t)
	h.addRepo(TypeModel, "org/evil", map[string][]byte{"../../escape.txt": []byte("x")})
	c := testClient(t, h)
	_, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/evil"), SnapshotOptions{})
	if err == nil || !strings.Contains(err.Error(), "unsafe file name") {
		t.Fatalf("want an unsafe name error, got %v", err)
	}
}

func TestHubErrorsSaySomethingUseful(t *testing.T) {
	h := newFakeHub(t)
	c := testClient(t, h)
	_, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/missing"), SnapshotOptions{})
	if err == nil || !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Fatalf("got %v", err)
	}
	h.addRepo(TypeModel, "org/tiny", modelFiles())
	_, err = c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny@nope"), SnapshotOptions{})
	if err == nil || !strings.Contains(err.Error(), `revision "nope" does not exist`) {
		t.Fatalf("got %v", err)
	}
}

func TestTokenGoesToTheHubOnlyAndNeverLeaks(t *testing.T) {
	h := newFakeHub(t)
	h.token = testToken
	h.addRepo(TypeModel, "org/private", modelFiles(), "model.safetensors")
	c := testClient(t, h)
	var logs []string
	var mu sync.Mutex
	c.Logf = func(format string, args ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	c.Progress = func(file string, done, total int64) {
		mu.Lock()
		logs = append(logs, fmt.Sprint(file, done, total))
		mu.Unlock()
	}
	h.cutAfter["model.safetensors"] = 1000 // exercise the retry log line too

	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/private"), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cdn int
	for _, r := range h.seen() {
		switch r.Server {
		case "hub":
			if r.Auth != "Bearer "+testToken {
				t.Errorf("hub request %s %s without the token", r.Method, r.Path)
			}
		case "cdn":
			cdn++
			if r.Auth != "" {
				t.Errorf("CDN request %s got Authorization %q", r.Path, r.Auth)
			}
		}
	}
	if cdn == 0 {
		t.Fatal("no request reached the CDN; the redirect path was not exercised")
	}

	// Errors, including ones whose server body echoes the header.
	var texts []string
	h.echoAuth = true
	_, err = c.Snapshot(context.Background(), mustParse(t, "hf://org/missing"), SnapshotOptions{})
	if err == nil {
		t.Fatal("want an error for a missing repo")
	}
	texts = append(texts, err.Error(), fmt.Sprintf("%+v", err))
	wrong := *c
	wrong.Token = testToken + "x"
	if _, err := wrong.Snapshot(context.Background(), mustParse(t, "hf://org/private"), SnapshotOptions{}); err == nil {
		t.Fatal("want an error for a wrong token")
	} else {
		texts = append(texts, err.Error())
	}
	sj, _ := json.Marshal(snap)
	cj, _ := json.Marshal(c)
	texts = append(texts, string(sj), snap.String(), string(cj), c.String(),
		fmt.Sprintf("%v %+v %#v", c, c, c), fmt.Sprintf("%v %+v %#v", *c, *c, *c))
	texts = append(texts, logs...)
	if len(logs) < 2 {
		t.Fatalf("expected log and progress lines, got %q", logs)
	}
	for _, s := range texts {
		if strings.Contains(s, testToken) || strings.Contains(s, "TestTokenThatMustNeverLeak") {
			t.Fatalf("token leaked into: %s", s)
		}
	}
}

func TestFromEnv(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HUGGING_FACE_HUB_TOKEN", "")
	t.Setenv("HF_TOKEN_PATH", "")
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "")
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	if err := os.WriteFile(filepath.Join(home, "token"), []byte("hf_fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := FromEnv()
	if c.Token != "hf_fromfile" || c.CacheDir != filepath.Join(home, "hub") || c.Endpoint != DefaultEndpoint || c.Offline {
		t.Fatalf("defaults from HF_HOME: %+v token %q", c, c.Token)
	}

	t.Setenv("HF_TOKEN", "hf_fromenv")
	t.Setenv("HF_HUB_CACHE", "/elsewhere/hub")
	t.Setenv("HF_ENDPOINT", "https://mirror.example/")
	t.Setenv("HF_HUB_OFFLINE", "1")
	c = FromEnv()
	if c.Token != "hf_fromenv" || c.CacheDir != "/elsewhere/hub" || c.Endpoint != "https://mirror.example" || !c.Offline {
		t.Fatalf("overrides: %+v token %q", c, c.Token)
	}
}

func TestParseURI(t *testing.T) {
	good := map[string]Repo{
		"hf://HuggingFaceTB/SmolLM2-135M-Instruct":                        {TypeModel, "HuggingFaceTB/SmolLM2-135M-Instruct", "main"},
		"hf://org/name@v1.0":                                              {TypeModel, "org/name", "v1.0"},
		"hf://org/name@refs/pr/1":                                         {TypeModel, "org/name", "refs/pr/1"},
		"hf://datasets/org/data@0123456789abcdef0123456789abcdef01234567": {TypeDataset, "org/data", "0123456789abcdef0123456789abcdef01234567"},
	}
	for in, want := range good {
		got, err := ParseURI(in)
		if err != nil || got != want {
			t.Errorf("ParseURI(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, err := ParseURI(got.String()); err != nil || again != got {
			t.Errorf("%s does not round-trip: %+v, %v", got, again, err)
		}
	}
	for _, in := range []string{
		"org/name", "https://huggingface.co/org/name", "hf://name", "hf://org/name/extra",
		"hf://../name", "hf://org/..", "hf://org/na--me", "hf://org/name@", "hf://org/name@../x",
		"hf://org/name@/abs", "hf://org/name@a//b", "hf://org/-name", "hf://org/name@a b",
	} {
		if _, err := ParseURI(in); err == nil {
			t.Errorf("ParseURI(%q) accepted", in)
		}
	}
}

func TestCancelledDownloadKeepsPartialForTheNextRun(t *testing.T) {
	h := newFakeHub(t)
	files := modelFiles()
	h.addRepo(TypeModel, "org/tiny", files, "model.safetensors")
	const sent = 70_000
	h.stallAfter["model.safetensors"] = sent
	c := testClient(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Progress = func(file string, done, _ int64) {
		if file == "model.safetensors" && done == sent {
			cancel()
		}
	}
	opts := SnapshotOptions{AllowPatterns: []string{"model.safetensors"}}

	_, err := c.Snapshot(ctx, mustParse(t, "hf://org/tiny"), opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	content := files["model.safetensors"]
	fi, err := os.Stat(filepath.Join(c.CacheDir, "models--org--tiny", "blobs", sha256Hex(content)+".incomplete"))
	if err != nil || fi.Size() != sent {
		t.Fatalf("want a %d-byte partial file, got %v %v", sent, fi, err)
	}

	c.Progress = nil
	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := readThrough(t, filepath.Join(snap.Dir, "model.safetensors")); string(got) != string(content) {
		t.Fatal("content differs")
	}
	if served := h.bytesServed("model.safetensors"); served != int64(len(content)) {
		t.Fatalf("server sent %d bytes over both runs for a %d-byte file", served, len(content))
	}
}
