package remotecache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/testregistry"
)

// The OCI store against the CNCF distribution registry in this process.
func TestOCIRoundTripAndRecords(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := testregistry.StartT(t, testregistry.Options{})
	ctx := context.Background()
	url := "oci://" + reg.Host + "/team/cache"
	w, err := Open(ctx, url, Options{Mode: ReadWrite})
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("ab", 32)
	ent := commitEntry(t, openCache(t), key, map[string]string{"model.gguf": "oci weights", "d/result.json": "{}"})
	if err := w.Upload(ctx, ent, true); err != nil {
		t.Fatal(err)
	}
	if w.Stats.RecordsUp.Load() != 1 || w.Stats.ObjectsUp.Load() != 2 {
		t.Fatalf("records %d, objects %d", w.Stats.RecordsUp.Load(), w.Stats.ObjectsUp.Load())
	}
	fresh := openCache(t)
	got, err := w.Fetch(ctx, fresh, key, stepOf(key))
	if err != nil || got == nil || got.Tree.SHA256 != ent.Tree.SHA256 {
		t.Fatalf("fetch: %v %v", got, err)
	}
	b, _ := os.ReadFile(filepath.Join(got.Dir, "model.gguf"))
	if string(b) != "oci weights" {
		t.Fatalf("fetched %q", b)
	}
	if files, err := w.Files(ctx, key, stepOf(key)); err != nil || len(files) != len(ent.Tree.Files) {
		t.Fatalf("files: %v %v", files, err)
	}
	if e, err := w.Fetch(ctx, openCache(t), strings.Repeat("cd", 32), stepOf(strings.Repeat("cd", 32))); e != nil || err != nil {
		t.Fatalf("miss: %v %v", e, err)
	}
	// A second record for the key is refused (checked before the write).
	err = w.be.put(ctx, recordName(key), bytes.NewReader([]byte("{}")), 2, strings.Repeat("0", 64), true)
	if !errors.Is(err, errExists) {
		t.Fatalf("second record: %v", err)
	}
	// A record tagged for another key is not trusted.
	raw := mustReadRecord(t, w, key)
	other := strings.Repeat("ef", 32)
	if err := w.be.put(ctx, recordName(other), bytes.NewReader(raw), int64(len(raw)), strings.Repeat("0", 64), false); err != nil {
		t.Fatal(err)
	}
	if e, err := w.Fetch(ctx, openCache(t), other, stepOf(other)); e != nil || err == nil || !strings.Contains(err.Error(), "not of efef") {
		t.Fatalf("moved record: %v %v", e, err)
	}
	if _, err := Open(ctx, url+":tag", Options{}); err == nil {
		t.Fatal("a tagged oci:// remote cache was accepted")
	}
}

func mustReadRecord(t *testing.T, s *Store, key string) []byte {
	o, err := s.be.get(context.Background(), recordName(key), recordLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	b, err := readAll(o, recordLimit)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An entry whose file was swapped for a link (to something outside the
// cache) is never uploaded: no link is followed.
func TestUploadFollowsNoLinks(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := testregistry.StartT(t, testregistry.Options{})
	ctx := context.Background()
	w, err := Open(ctx, "oci://"+reg.Host+"/links", Options{Mode: ReadWrite})
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("not for sharing"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{"file", "folder"} {
		key := strings.Repeat(map[string]string{"file": "1a", "folder": "2b"}[where], 32)
		ent := commitEntry(t, openCache(t), key, map[string]string{"sub/model.gguf": "not for sharing"})
		target, link := secret, filepath.Join(ent.Dir, "sub", "model.gguf")
		if where == "folder" {
			target, link = filepath.Dir(secret), filepath.Join(ent.Dir, "sub")
			if err := os.Rename(secret, filepath.Join(target, "model.gguf")); err != nil {
				t.Fatal(err)
			}
			secret = filepath.Join(target, "model.gguf")
		}
		if err := os.Chmod(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		if err := w.Upload(ctx, ent, false); err == nil || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("%s link: uploaded (%v)", where, err)
		}
		if ok, _ := w.Has(ctx, key); ok {
			t.Errorf("%s link: a record was written", where)
		}
	}
}
