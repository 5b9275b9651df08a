package oci

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/provenance"
	"github.com/edgepipe/edgepipe/internal/testregistry"
)

// folder writes a published-style artifact folder with a manifest and
// signed provenance, and returns it with the signer.
func folder(t *testing.T) (string, *provenance.Signer) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "q4km")
	for rel, body := range map[string]string{
		"model-q4_k_m.gguf":        strings.Repeat("quantized weights ", 1000),
		"logs/gguf-quantize.log":   "quantize: ok\n",
		"tokenizer/tokenizer.json": `{"version": "1.0"}`,
	} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(body), 0o644))
	}
	size := int64(18000)
	m := &manifest.Manifest{
		EdgepipeVersion: "0.1.0-test",
		Created:         time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC),
		Recipe:          manifest.Recipe{Name: "demo"},
		Target:          manifest.Target{Name: "q4km", Device: "x86-laptop", Format: "gguf-q4_k_m"},
		Source:          manifest.Source{URI: "./model"},
		Metrics: manifest.Metrics{SizeBytes: &size, Perplexity: &manifest.Perplexity{Baseline: 16, Converted: 16.5, Delta: 0.5,
			Ratio: 16.5 / 16, Verdict: manifest.VerdictOK, WarnDelta: 0.25, MaxDelta: 2}},
	}
	must(t, manifest.Write(dir, m))
	st, err := provenance.New(dir, m, provenance.Run{InvocationID: "urn:uuid:test"}, nil)
	must(t, err)
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	s, err := provenance.NewSigner(k)
	must(t, err)
	must(t, provenance.Write(dir, st, s))
	return dir, s
}

func ref(t *testing.T, s string) registry.Reference {
	t.Helper()
	r, err := registry.ParseReference(s)
	must(t, err)
	return r
}

func TestPushPullRoundTrip(t *testing.T) {
	reg := testregistry.StartT(t, testregistry.Options{})
	ctx := context.Background()
	dir, signer := folder(t)
	r := ref(t, reg.Host+"/edgepipe/demo:q4km")
	opt := Options{PlainHTTP: true}

	pushed, err := Push(ctx, dir, r, opt)
	must(t, err)
	// 3 files + manifest.json + provenance + bundle (oras-go pushes the empty config).
	if pushed.Uploaded != 6 || len(pushed.Referrers) != 2 {
		t.Fatalf("first push uploaded %d blobs, %d referrers", pushed.Uploaded, len(pushed.Referrers))
	}

	// Pushing again is idempotent: nothing uploaded, the same digest.
	again, err := Push(ctx, dir, r, opt)
	must(t, err)
	if again.Uploaded != 0 || again.Manifest.Digest != pushed.Manifest.Digest {
		t.Fatalf("second push uploaded %d blobs, digest %s (first %s)", again.Uploaded, again.Manifest.Digest, pushed.Manifest.Digest)
	}

	// The manifest as the registry serves it: layers titled by path, the
	// annotations that say what it is.
	repo, err := opt.repository(r)
	must(t, err)
	_, mb, err := fetchManifest(ctx, repo, "q4km")
	must(t, err)
	var man ocispec.Manifest
	must(t, json.Unmarshal(mb, &man))
	if man.ArtifactType != ArtifactType {
		t.Fatalf("artifactType %q", man.ArtifactType)
	}
	types := map[string]string{}
	for _, l := range man.Layers {
		types[l.Annotations[ocispec.AnnotationTitle]] = l.MediaType
	}
	for title, mt := range map[string]string{
		"model-q4_k_m.gguf": "application/vnd.edgepipe.model.gguf", "manifest.json": ManifestMediaType,
		"logs/gguf-quantize.log": LogMediaType, "tokenizer/tokenizer.json": FileMediaType,
	} {
		if types[title] != mt {
			t.Errorf("layer %s has media type %q, want %q", title, types[title], mt)
		}
	}
	for k, v := range map[string]string{AnnotationFormat: "gguf-q4_k_m", AnnotationDevice: "x86-laptop",
		AnnotationPPL: "16.5", AnnotationDelta: "0.5", AnnotationVerdict: "ok", AnnotationSize: "18000",
		ocispec.AnnotationCreated: "2026-05-01T10:00:00Z"} {
		if man.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, man.Annotations[k], v)
		}
	}

	// Pull back into a new folder: every file, the provenance and the
	// signature, verified.
	dest := filepath.Join(t.TempDir(), "pulled")
	d, err := Pull(ctx, r, dest, opt)
	must(t, err)
	if d.Digest != pushed.Manifest.Digest {
		t.Fatalf("pulled %s, pushed %s", d.Digest, pushed.Manifest.Digest)
	}
	if ps, err := manifest.Verify(dest); err != nil || len(ps) > 0 {
		t.Fatalf("pulled folder: %v %v", ps, err)
	}
	res, err := provenance.Check(dest, signer.Public())
	must(t, err)
	if !res.SignatureChecked || len(res.Problems) > 0 {
		t.Fatalf("pulled provenance: %+v", res)
	}
	for _, rel := range []string{"model-q4_k_m.gguf", "manifest.json", manifest.ProvenanceFile, manifest.SignatureFile} {
		a, _ := os.ReadFile(filepath.Join(dir, rel))
		b, _ := os.ReadFile(filepath.Join(dest, rel))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs after the round trip", rel)
		}
	}
	// Pulling again replaces the folder atomically.
	_, err = Pull(ctx, r, dest, opt)
	must(t, err)
}

func TestPushRefusesChangedFile(t *testing.T) {
	reg := testregistry.StartT(t, testregistry.Options{})
	dir, _ := folder(t)
	// Same size, other bytes: the registry checks the declared digest.
	p := filepath.Join(dir, "logs/gguf-quantize.log")
	must(t, os.WriteFile(p, []byte("quantize: KO\n"), 0o644))
	_, err := Push(context.Background(), dir, ref(t, reg.Host+"/edgepipe/demo:bad"), Options{PlainHTTP: true})
	if err == nil {
		t.Fatal("a file that does not match its manifest was pushed")
	}
}

func TestPushWithDockerConfigCredentials(t *testing.T) {
	reg := testregistry.StartT(t, testregistry.Options{User: "ci", Password: "s3cret-token"})
	dir, _ := folder(t)
	r := ref(t, reg.Host+"/team/model:v1")
	cfgDir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", cfgDir)

	_, err := Push(context.Background(), dir, r, Options{PlainHTTP: true})
	if err == nil || !strings.Contains(err.Error(), "docker login") {
		t.Fatalf("push without credentials: %v, want a hint to log in", err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("ci:s3cret-token"))
	cfg := `{"auths": {"` + reg.Host + `": {"auth": "` + auth + `"}}}`
	must(t, os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(cfg), 0o600))
	_, err = Push(context.Background(), dir, r, Options{PlainHTTP: true})
	must(t, err)
	_, err = Pull(context.Background(), r, filepath.Join(t.TempDir(), "back"), Options{PlainHTTP: true})
	must(t, err)
}

func TestPullRefusesHostileArtifacts(t *testing.T) {
	reg := testregistry.StartT(t, testregistry.Options{})
	ctx := context.Background()
	opt := Options{PlainHTTP: true}
	repo, err := opt.repository(ref(t, reg.Host+"/evil/x:y"))
	must(t, err)
	push := func(tag, artifactType string, titles ...string) {
		var layers []ocispec.Descriptor
		for _, title := range titles {
			b := []byte("payload for " + title)
			d := content.NewDescriptorFromBytes(FileMediaType, b)
			d.Annotations = map[string]string{ocispec.AnnotationTitle: title}
			must(t, repo.Push(ctx, d, bytes.NewReader(b)))
			layers = append(layers, d)
		}
		d, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, artifactType, oras.PackManifestOptions{Layers: layers})
		must(t, err)
		must(t, repo.Tag(ctx, d, tag))
	}
	push("escape", ArtifactType, "manifest.json", "../outside.txt")
	push("sidecar", ArtifactType, "manifest.json", manifest.SignatureFile)
	push("other", "application/vnd.example.thing", "manifest.json")

	parent := t.TempDir()
	for tag, want := range map[string]string{
		"escape":  "not a relative path inside the folder",
		"sidecar": "only a referrer may carry",
		"other":   "is not an edgepipe artifact",
	} {
		_, err := Pull(ctx, ref(t, reg.Host+"/evil/x:"+tag), filepath.Join(parent, "out"), opt)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("pull %s: %v, want %q", tag, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(parent, "outside.txt")); !os.IsNotExist(err) {
		t.Fatalf("a layer was written outside the folder: %v", err)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 0 {
		t.Fatalf("failed pulls left %v", entries)
	}

	// An existing folder that is not an artifact is never replaced.
	dir, _ := folder(t)
	r := ref(t, reg.Host+"/edgepipe/demo:q4km")
	_, err = Push(ctx, dir, r, opt)
	must(t, err)
	plain := filepath.Join(parent, "notes")
	must(t, os.MkdirAll(plain, 0o755))
	if _, err := Pull(ctx, r, plain, opt); err == nil || !strings.Contains(err.Error(), "not an artifact folder") {
		t.Fatalf("pull over a plain folder: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
