package shared

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// miniHub serves one model repository the way the Hugging Face Hub does
// for small (non-LFS) files: the revision API, and resolve with
// X-Repo-Commit and the git blob sha1 as ETag.
type miniHub struct {
	commit string
	files  map[string]string
}

func (h miniHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/api/models/org/name/revision/main" {
		type sibling struct {
			RFilename string `json:"rfilename"`
		}
		out := struct {
			SHA      string    `json:"sha"`
			Siblings []sibling `json:"siblings"`
		}{SHA: h.commit}
		for name := range h.files {
			out.Siblings = append(out.Siblings, sibling{name})
		}
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/org/name/resolve/"+h.commit+"/")
	content, found := h.files[name]
	if !ok || !found {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, `{"error": "Entry not found"}`, http.StatusNotFound)
		return
	}
	sum := sha1.New()
	fmt.Fprintf(sum, "blob %d\x00%s", len(content), content)
	w.Header().Set("X-Repo-Commit", h.commit)
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum.Sum(nil))+`"`)
	http.ServeContent(w, r, "", time.Time{}, strings.NewReader(content))
}

// useHub points the Hugging Face client at a hub on 127.0.0.1 with an
// empty cache, for the test's duration.
func useHub(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cache := t.TempDir()
	for k, v := range map[string]string{"HF_ENDPOINT": srv.URL, "HF_HOME": cache, "HF_HUB_CACHE": filepath.Join(cache, "hub"),
		"HF_TOKEN": "", "HUGGING_FACE_HUB_TOKEN": "", "HF_TOKEN_PATH": filepath.Join(cache, "no-token"), "HF_HUB_OFFLINE": ""} {
		t.Setenv(k, v)
	}
	return filepath.Join(cache, "hub")
}

// An hf:// source lands in the Hugging Face cache (where Python tools find
// it) and is linked into the step's output; the commit is the revision.
func TestFetchHF(t *testing.T) {
	commit := strings.Repeat("c0ffee", 6) + "abcd"
	hubCache := useHub(t, miniHub{commit: commit, files: map[string]string{
		"config.json": `{"model_type": "llama"}`, "model.safetensors": "weights", "sub/tokenizer.json": "{}"}})
	f := newFakeStep(t, &FetchParams{Source: "hf://org/name"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Fetch.Run(ctx, f.sc); err != nil {
		t.Fatal(err)
	}
	if got := listFiles(t, f.sc.Out); !slices.Equal(got, []string{"config.json", "model.safetensors", "sub/tokenizer.json"}) {
		t.Fatalf("output holds %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(f.sc.Out, "model.safetensors")); string(b) != "weights" {
		t.Errorf("model.safetensors holds %q", b)
	}
	if f.sc.Result.Revision != commit {
		t.Errorf("revision %q, want %s", f.sc.Result.Revision, commit)
	}
	snap := f.sc.Result.Facts["hf_snapshot"]
	if !strings.HasPrefix(snap, hubCache) || !strings.HasSuffix(snap, commit) {
		t.Errorf("hf_snapshot %q is not the commit's folder under %s", snap, hubCache)
	}
	if !strings.Contains(f.logText(), commit) {
		t.Errorf("the log does not say which commit: %q", f.logText())
	}
}

// The recipe's model.allow_pickle and trust_remote_code reach the client.
func TestFetchHFPassesTheRecipesConsent(t *testing.T) {
	commit := strings.Repeat("ab", 20)
	useHub(t, miniHub{commit: commit, files: map[string]string{
		"config.json": `{"auto_map": {"AutoModel": "modeling.M"}}`, "pytorch_model.bin": "pickle", "modeling.py": "code"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		p       FetchParams
		wantErr string
	}{
		{FetchParams{}, "ships weights only in pickle format"},
		{FetchParams{AllowPickle: true}, "ships model code (modeling.py)"},
		{FetchParams{AllowPickle: true, TrustRemoteCode: true}, ""},
	} {
		p := tc.p
		p.Source = "hf://org/name"
		f := newFakeStep(t, &p)
		err := Fetch.Run(ctx, f.sc)
		if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.wantErr)
		}
	}
}

func TestLinkOrCopy(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "blob")
	if err := os.WriteFile(src, []byte("content"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "out", "a", "b", "file")
	if err := linkOrCopy(src, dst); err != nil {
		t.Fatal(err)
	}
	s1, _ := os.Stat(src)
	s2, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(s1, s2) {
		t.Error("a blob on the same file system was copied, not linked")
	}
	// Across file systems no link can be made: the bytes are copied.
	shm, err := os.MkdirTemp("/dev/shm", "linkorcopy-")
	if err != nil {
		t.Logf("no /dev/shm (%v): the copy across file systems is not tested", err)
	} else {
		t.Cleanup(func() { os.RemoveAll(shm) })
		far := filepath.Join(shm, "blob")
		if err := os.WriteFile(far, []byte("far"), 0o644); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "out", "far")
		if err := linkOrCopy(far, dst); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(dst); string(b) != "far" {
			t.Errorf("the copy holds %q", b)
		}
	}
	if err := linkOrCopy(filepath.Join(dir, "missing"), filepath.Join(dir, "x")); err == nil {
		t.Error("a missing blob was linked")
	}
}

func TestMoveContents(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	writeFiles(t, from, map[string]string{"a": "1", "d/b": "2", ".hidden": "3"})
	if err := moveContents(from, to); err != nil {
		t.Fatal(err)
	}
	if got := listFiles(t, to); !slices.Equal(got, []string{".hidden", "a", "d/b"}) {
		t.Errorf("moved %v", got)
	}
	if left := listFiles(t, from); len(left) != 0 {
		t.Errorf("left %v", left)
	}
	if err := moveContents(filepath.Join(from, "missing"), to); err == nil {
		t.Error("moved a missing folder")
	}
}

// A fetch of a builtin: source that cannot be provisioned says how to fix
// it (the llama toolchain is not installed in an empty cache).
func TestFetchBuiltinNeedsItsToolchain(t *testing.T) {
	f := newFakeStep(t, &FetchParams{Source: "builtin:smollm2-135m"})
	err := Fetch.Run(context.Background(), f.sc)
	if err == nil || !strings.Contains(err.Error(), "edgepipe toolchain install llama") || !strings.HasPrefix(err.Error(), "fetch builtin:smollm2-135m: ") {
		t.Errorf("err = %v", err)
	}
}
