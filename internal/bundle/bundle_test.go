package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// sparseTar is a tar with one PAX sparse member (GNU format 1.0) of size
// bytes that carries one byte of data. archive/tar writes no sparse files
// and drops GNU.sparse.* records, so they go in under a stand-in prefix of
// the same length, patched afterwards (outside any header checksum).
func sparseTar(t *testing.T, name string, size int64) []byte {
	t.Helper()
	const stand = "XNU.sparse."
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := make([]byte, 513)
	copy(body, fmt.Sprintf("1\n%d\n1\n", size-1))
	body[512] = 'x'
	h := &tar.Header{Name: "GNUSparseFile.0/" + name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg,
		Format: tar.FormatPAX, PAXRecords: map[string]string{
			stand + "major": "1", stand + "minor": "0", stand + "name": name, stand + "realsize": strconv.FormatInt(size, 10)}}
	if err := tw.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(buf.Bytes(), []byte(stand), []byte("GNU.sparse."))
}

// A sparse member is a few bytes in the tar and gigabytes on disk:
// refused, in both GNU forms, before anything is written.
func TestExtractRefusesSparseMembers(t *testing.T) {
	pax := filepath.Join(t.TempDir(), "pax.tar")
	if err := os.WriteFile(pax, sparseTar(t, "files/big", 80<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	// The stand-in prefix was patched into a sparse member archive/tar
	// itself recognises.
	f, err := os.Open(pax)
	if err != nil {
		t.Fatal(err)
	}
	h, err := tar.NewReader(f).Next()
	f.Close()
	if err != nil || h.Name != "files/big" || h.Size != 80<<20 {
		t.Fatalf("the test's sparse tar reads as %+v, %v", h, err)
	}
	gnu := filepath.Join(t.TempDir(), "gnu.tar")
	err = writeTar(gnu, func(tw *tar.Writer) error {
		return tw.WriteHeader(&tar.Header{Name: "files/big", Typeflag: tar.TypeGNUSparse, Format: tar.FormatGNU, Mode: 0o644})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{pax, gnu} {
		dir := t.TempDir()
		_, err := Extract(context.Background(), p, dir, nil)
		if err == nil || !strings.Contains(err.Error(), `member "files/big" is a sparse file`) {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "files", "big")); err == nil {
			t.Errorf("%s: unpacked the sparse member", filepath.Base(p))
		}
	}
}

// No member may be larger than what `plan --bundle` embeds: refused from
// its header, before its bytes are read.
func TestExtractRefusesOversizeMember(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "files/big", Typeflag: tar.TypeReg, Mode: 0o644, Size: DefaultEmbedLimit + 1}); err != nil {
		t.Fatal(err)
	}
	// The header alone: its bytes would be the 64 MiB the check spares.
	p := filepath.Join(t.TempDir(), "b.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Extract(context.Background(), p, t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), `member "files/big" is 67108865 bytes, over the 64 MiB`) {
		t.Fatalf("an oversize member: %v", err)
	}
}

// plan.json's recipe must be a file of the bundle: an absolute path or one
// that climbs out would run (or quote) a file of the worker.
func TestExtractRefusesRecipeOutsideBundle(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "r.yaml")
	write(t, outside, "edgepipe: 1\n")
	for _, recipe := range []string{outside, "../r.yaml", "files/../../r.yaml", "files/missing.yaml", "files", ""} {
		p := filepath.Join(t.TempDir(), "b.tar")
		err := writeTar(p, func(tw *tar.Writer) error {
			for name, body := range map[string]string{
				"plan.json":       fmt.Sprintf(`{"recipe": %q, "steps": []}`, recipe),
				"bundle.json":     `{"format": 1}`,
				"files/real.yaml": "edgepipe: 1\n",
			} {
				if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
					return err
				}
				if _, err := tw.Write([]byte(body)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Extract(context.Background(), p, t.TempDir(), nil)
		if err == nil || !strings.Contains(err.Error(), "which is not a file of the bundle") {
			t.Errorf("recipe %q: %v", recipe, err)
		}
	}
}
