package bundle

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/plan"
)

// memBlobs is a content-addressed store in memory.
type memBlobs map[string][]byte

func (m memBlobs) PutBlob(_ context.Context, path string) (digest.FileDigest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return digest.FileDigest{}, err
	}
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:])
	m[h] = b
	return digest.FileDigest{Path: path, SHA256: h, Size: int64(len(b))}, nil
}

func (m memBlobs) GetBlob(_ context.Context, f digest.FileDigest, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, m[f.SHA256], 0o644)
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTripRelativeAndByDigest(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	recipe := filepath.Join(src, "recipes", "r.yaml")
	write(t, recipe, "edgepipe: 1\n")
	write(t, recipe+".lock", "lock\n")
	data := filepath.Join(src, "data", "eval.txt") // beside, not under, the recipe's folder
	write(t, data, "small eval text\n")
	big := filepath.Join(src, "recipes", "model", "weights.bin")
	write(t, big, strings.Repeat("w", 100))
	out := filepath.Join(t.TempDir(), "b.tar")
	blobs := memBlobs{}
	sv := &plan.Saved{Recipe: recipe, Steps: []plan.SavedStep{{ID: "s", Kind: "k"}}}
	if err := Write(ctx, out, sv, recipe, []string{data, big}, blobs, 50); err != nil {
		t.Fatal(err)
	}
	if len(blobs) != 1 {
		t.Fatalf("%d blobs, want the one file over the limit", len(blobs))
	}
	if !IsBundle(out) || IsBundle(recipe) {
		t.Fatal("IsBundle")
	}
	if err := Write(ctx, out, sv, recipe, []string{data, big}, nil, 50); err == nil || !strings.Contains(err.Error(), "--remote-cache") {
		t.Fatalf("a big file without a remote cache: %v", err)
	}
	dir := t.TempDir()
	planPath, err := Extract(ctx, out, dir, blobs)
	if err != nil {
		t.Fatal(err)
	}
	pj, err := plan.ReadSaved(planPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "files", "recipes", "r.yaml"); pj.Recipe != want {
		t.Fatalf("recipe at %s, want %s", pj.Recipe, want)
	}
	for rel, want := range map[string]string{"recipes/r.yaml.lock": "lock\n", "data/eval.txt": "small eval text\n", "recipes/model/weights.bin": strings.Repeat("w", 100)} {
		b, err := os.ReadFile(filepath.Join(dir, "files", rel))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v", rel, b, err)
		}
	}
	if _, err := Extract(ctx, out, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "give --remote-cache") {
		t.Fatalf("extract without the remote cache: %v", err)
	}
}

func TestExtractRefusesHostileMembers(t *testing.T) {
	for name, h := range map[string]tar.Header{
		"parent":   {Name: "../evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644},
		"absolute": {Name: "/tmp/evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644},
		"symlink":  {Name: "files/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
		"hardlink": {Name: "files/link", Typeflag: tar.TypeLink, Linkname: "plan.json"},
		"device":   {Name: "files/dev", Typeflag: tar.TypeChar},
	} {
		p := filepath.Join(t.TempDir(), "b.tar")
		err := writeTar(p, func(tw *tar.Writer) error {
			if err := tw.WriteHeader(&h); err != nil {
				return err
			}
			if h.Size > 0 {
				_, err := tw.Write([]byte("x"))
				return err
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if _, err := Extract(context.Background(), p, dir, nil); err == nil {
			t.Errorf("%s: extracted", name)
		}
		if _, err := os.Lstat(filepath.Join(dir, "files", "link")); err == nil {
			t.Errorf("%s: left a link behind", name)
		}
	}
}
