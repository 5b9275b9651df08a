package oci

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/testregistry"
)

func TestMediaType(t *testing.T) {
	for rel, want := range map[string]string{
		"manifest.json":          ManifestMediaType,
		"logs/gguf-quantize.log": LogMediaType,
		"logs/nested/x.gguf":     LogMediaType, // a log, whatever its name
		"model-q4_k_m.gguf":      "application/vnd.edgepipe.model.gguf",
		"MODEL.GGUF":             "application/vnd.edgepipe.model.gguf",
		"sub/model.onnx":         "application/vnd.edgepipe.model.onnx",
		"model.safetensors":      "application/vnd.edgepipe.model.safetensors",
		"model.tflite":           "application/vnd.edgepipe.model.tflite",
		"model.pte":              "application/vnd.edgepipe.model.pte",
		"params.bin":             "application/vnd.edgepipe.model.bin",
		"tokenizer.json":         FileMediaType,
		"README":                 FileMediaType,
		"sub/manifest.json":      FileMediaType, // only the folder's own
	} {
		if got := MediaType(rel); got != want {
			t.Errorf("MediaType(%q) = %q, want %q", rel, got, want)
		}
	}
}

func TestPushNeedsATag(t *testing.T) {
	dir, _ := folder(t)
	_, err := Push(context.Background(), dir, ref(t, "127.0.0.1:1/edgepipe/demo"), Options{PlainHTTP: true})
	if err == nil || !strings.Contains(err.Error(), "no tag") {
		t.Errorf("%v", err)
	}
}

// An artifact pushed without its provenance pulls back without it; the
// puller's provenance check decides whether that is acceptable.
func TestPushPullWithoutProvenance(t *testing.T) {
	reg := testregistry.StartT(t, testregistry.Options{})
	ctx := context.Background()
	dir, _ := folder(t)
	for _, side := range []string{manifest.ProvenanceFile, manifest.SignatureFile} {
		must(t, os.Remove(filepath.Join(dir, side)))
	}
	r := ref(t, reg.Host+"/edgepipe/plain:v1")
	p, err := Push(ctx, dir, r, Options{PlainHTTP: true})
	must(t, err)
	if len(p.Referrers) != 0 {
		t.Errorf("%d referrers pushed for a folder without sidecars", len(p.Referrers))
	}
	dest := filepath.Join(t.TempDir(), "back")
	_, err = Pull(ctx, r, dest, Options{PlainHTTP: true})
	must(t, err)
	for _, side := range []string{manifest.ProvenanceFile, manifest.SignatureFile} {
		if _, err := os.Stat(filepath.Join(dest, side)); !os.IsNotExist(err) {
			t.Errorf("%s appeared (%v)", side, err)
		}
	}
	if ps, err := manifest.Verify(dest); err != nil || len(ps) > 0 {
		t.Errorf("pulled folder: %v %v", ps, err)
	}
}

// What a pull refuses leaves the destination as it was: a tag the
// registry lacks, malformed artifacts, and a folder the caller's check
// rejects.
func TestPullRefusals(t *testing.T) {
	reg := testregistry.StartT(t, testregistry.Options{})
	ctx := context.Background()
	opt := Options{PlainHTTP: true}
	repo, err := opt.repository(ref(t, reg.Host+"/odd/x:y"))
	must(t, err)
	pushLayers := func(tag string, titles ...string) {
		var layers []ocispec.Descriptor
		for _, title := range titles {
			b := []byte("payload for " + title)
			d := content.NewDescriptorFromBytes(FileMediaType, b)
			d.Annotations = map[string]string{ocispec.AnnotationTitle: title}
			must(t, repo.Push(ctx, d, bytes.NewReader(b)))
			layers = append(layers, d)
		}
		d, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, ArtifactType, oras.PackManifestOptions{Layers: layers})
		must(t, err)
		must(t, repo.Tag(ctx, d, tag))
	}
	pushLayers("twice", "manifest.json", "model.gguf", "model.gguf")
	pushLayers("nomanifest", "model.gguf")

	dir, _ := folder(t)
	good := ref(t, reg.Host+"/edgepipe/demo:q4km")
	_, err = Push(ctx, dir, good, opt)
	must(t, err)

	parent := t.TempDir()
	dest := filepath.Join(parent, "out")
	boom := errors.New("its signature is not ours")
	for _, tc := range []struct {
		name string
		ref  string
		opt  Options
		want string
	}{
		{"no such tag", reg.Host + "/edgepipe/demo:absent", opt, "the registry has no such artifact: check the repository and tag"},
		{"two layers of one name", reg.Host + "/odd/x:twice", opt, "two layers are titled model.gguf"},
		{"no manifest layer", reg.Host + "/odd/x:nomanifest", opt, "the artifact has no manifest.json layer"},
		{"refused by the caller", good.String(), Options{PlainHTTP: true, Accept: func(string) error { return boom }},
			"its signature is not ours; nothing was written to " + dest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Pull(ctx, ref(t, tc.ref), dest, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Errorf("a refused pull left %v", entries)
			}
		})
	}
}

// Repository opens the repository itself: a tag in the reference does
// not matter there.
func TestRepository(t *testing.T) {
	repo, err := Repository(ref(t, "127.0.0.1:5000/edgepipe/cache:ignored"), Options{PlainHTTP: true})
	if err != nil || repo.Reference.Registry != "127.0.0.1:5000" || repo.Reference.Repository != "edgepipe/cache" || !repo.PlainHTTP {
		t.Errorf("%+v, %v", repo, err)
	}
}
