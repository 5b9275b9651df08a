// Package oci pushes a published artifact folder to an OCI registry as an
// OCI 1.1 artifact, and pulls one back into a folder, with oras-go.
//
// Layout: one image manifest with artifactType ArtifactType, the empty
// config, one layer per file of the folder's manifest.json plus
// manifest.json itself (each titled with its path), and annotations for
// the target and its measured quality. The provenance statement and its
// signature bundle are separate artifacts whose subject is that manifest
// (OCI referrers; registries without the referrers API get oras-go's
// fallback tag). Everything is addressed by digest, so pushing the same
// folder again uploads nothing and yields the same manifest digest.
package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/manifest"
)

// Media and artifact types edgepipe defines (docs/registries.md).
const (
	// ArtifactType is the model manifest's artifactType.
	ArtifactType = "application/vnd.edgepipe.artifact.v1"
	// ManifestMediaType is the manifest.json layer.
	ManifestMediaType = "application/vnd.edgepipe.manifest.v1+json"
	// LogMediaType is a step log (logs/*.log).
	LogMediaType = "application/vnd.edgepipe.log.v1"
	// FileMediaType is any other file of the folder.
	FileMediaType = "application/vnd.edgepipe.file.v1"
	// ProvenanceArtifactType is the referrer holding provenance.intoto.json.
	ProvenanceArtifactType = "application/vnd.in-toto+json"
	// BundleArtifactType is the referrer holding provenance.sigstore.json,
	// as cosign attaches Sigstore bundles.
	BundleArtifactType = "application/vnd.dev.sigstore.bundle.v0.3+json"
)

// Annotation keys on the model manifest, besides the OCI ones.
const (
	AnnotationPrefix   = "io.github.edgepipe."
	AnnotationRecipe   = AnnotationPrefix + "recipe"
	AnnotationTarget   = AnnotationPrefix + "target"
	AnnotationFormat   = AnnotationPrefix + "format"
	AnnotationDevice   = AnnotationPrefix + "device"
	AnnotationSize     = AnnotationPrefix + "size_bytes"
	AnnotationPPL      = AnnotationPrefix + "perplexity"
	AnnotationBaseline = AnnotationPrefix + "perplexity.baseline"
	AnnotationDelta    = AnnotationPrefix + "perplexity.delta"
	AnnotationVerdict  = AnnotationPrefix + "verdict"
	AnnotationVersion  = AnnotationPrefix + "edgepipe_version"
)

// modelTypes maps a model file's extension to its layer media type.
var modelTypes = map[string]string{
	".gguf":        "application/vnd.edgepipe.model.gguf",
	".onnx":        "application/vnd.edgepipe.model.onnx",
	".safetensors": "application/vnd.edgepipe.model.safetensors",
	".tflite":      "application/vnd.edgepipe.model.tflite",
	".pte":         "application/vnd.edgepipe.model.pte",
	".bin":         "application/vnd.edgepipe.model.bin",
}

// MediaType is the layer media type of the folder file at rel.
func MediaType(rel string) string {
	switch {
	case rel == manifest.FileName:
		return ManifestMediaType
	case strings.HasPrefix(rel, "logs/"):
		return LogMediaType
	}
	if t, ok := modelTypes[strings.ToLower(path.Ext(rel))]; ok {
		return t
	}
	return FileMediaType
}

// Options configure access to a registry.
type Options struct {
	// PlainHTTP talks HTTP instead of HTTPS; the caller allows it only
	// for loopback registries or when the recipe says insecure: true.
	PlainHTTP bool
	// Credentials looks up a registry's credentials; nil reads the Docker
	// config ($DOCKER_CONFIG/config.json or ~/.docker/config.json, with its
	// credential helpers).
	Credentials auth.CredentialFunc
	// HTTPClient makes the requests; nil is oras-go's retrying default
	// client. The remote cache passes one whose connections time out.
	HTTPClient *http.Client
	// Accept, for Pull, judges the staged folder before it replaces the
	// destination (a provenance or signature check): an artifact it
	// refuses is never published.
	Accept func(staging string) error
}

func (o Options) repository(ref registry.Reference) (*remote.Repository, error) {
	repo, err := remote.NewRepository(ref.Registry + "/" + ref.Repository)
	if err != nil {
		return nil, err
	}
	repo.PlainHTTP = o.PlainHTTP
	// On registries without the referrers API, oras-go keeps the list of
	// attachments in a tag it rewrites; deleting the replaced list needs
	// manifest deletion, which most registries disable. A stale list is
	// an unreferenced manifest the registry's own GC can collect.
	repo.SkipReferrersGC = true
	cred := o.Credentials
	if cred == nil {
		store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
		if err != nil {
			return nil, fmt.Errorf("read the Docker credentials config: %w", err)
		}
		cred = credentials.Credential(store)
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = retry.DefaultClient
	}
	repo.Client = &auth.Client{Client: hc, Cache: auth.NewCache(), Credential: cred}
	return repo, nil
}

// Pushed is what Push put in the registry.
type Pushed struct {
	Manifest ocispec.Descriptor
	// Referrers are the provenance and signature artifacts attached.
	Referrers []ocispec.Descriptor
	// Uploaded counts the blobs the registry did not have yet.
	Uploaded int
}

// Push uploads the artifact folder dir and tags it ref.Reference. The
// folder's files must match its manifest (a blob whose bytes differ from the
// recorded digest is refused by the registry, never published under it).
func Push(ctx context.Context, dir string, ref registry.Reference, opt Options) (*Pushed, error) {
	p, err := push(ctx, dir, ref, opt)
	return p, explain(ref, err)
}

func push(ctx context.Context, dir string, ref registry.Reference, opt Options) (*Pushed, error) {
	if ref.Reference == "" {
		return nil, fmt.Errorf("push %s: no tag", ref)
	}
	m, err := manifest.Read(dir)
	if err != nil {
		return nil, err
	}
	repo, err := opt.repository(ref)
	if err != nil {
		return nil, err
	}
	pushed := &Pushed{}
	var layers []ocispec.Descriptor
	for _, f := range m.Files {
		d := ocispec.Descriptor{MediaType: MediaType(f.Path), Digest: digest.NewDigestFromEncoded(digest.SHA256, f.SHA256), Size: f.Size,
			Annotations: map[string]string{ocispec.AnnotationTitle: f.Path}}
		if err := pushFile(ctx, repo, d, filepath.Join(dir, filepath.FromSlash(f.Path)), &pushed.Uploaded); err != nil {
			return nil, err
		}
		layers = append(layers, d)
	}
	mj, err := boundedfile.Read(filepath.Join(dir, manifest.FileName), boundedfile.ManifestLimit)
	if err != nil {
		return nil, err
	}
	md, err := pushBytes(ctx, repo, ManifestMediaType, manifest.FileName, mj, &pushed.Uploaded)
	if err != nil {
		return nil, err
	}
	layers = append(layers, md)

	// The manifest's creation time, not now: the same folder always packs
	// to the same OCI manifest.
	created := m.Created.UTC().Format(time.RFC3339)
	desc, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, ArtifactType, oras.PackManifestOptions{
		Layers: layers, ManifestAnnotations: annotations(m, created)})
	if err != nil {
		return nil, fmt.Errorf("push %s: %w", ref, err)
	}
	if err := repo.Tag(ctx, desc, ref.Reference); err != nil {
		return nil, fmt.Errorf("push %s: tag: %w", ref, err)
	}
	pushed.Manifest = desc

	for _, side := range []struct{ file, artifactType string }{
		{manifest.ProvenanceFile, ProvenanceArtifactType},
		{manifest.SignatureFile, BundleArtifactType},
	} {
		b, err := boundedfile.Read(filepath.Join(dir, side.file), boundedfile.SidecarLimit)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ld, err := pushBytes(ctx, repo, side.artifactType, side.file, b, &pushed.Uploaded)
		if err != nil {
			return nil, err
		}
		rd, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, side.artifactType, oras.PackManifestOptions{
			Subject: &desc, Layers: []ocispec.Descriptor{ld},
			ManifestAnnotations: map[string]string{ocispec.AnnotationCreated: created}})
		if err != nil {
			return nil, fmt.Errorf("push %s: attach %s: %w", ref, side.file, err)
		}
		pushed.Referrers = append(pushed.Referrers, rd)
	}
	return pushed, nil
}

// annotations describe the artifact on its manifest, so a registry UI or
// `oras manifest fetch` shows what it is and how well it scored.
func annotations(m *manifest.Manifest, created string) map[string]string {
	a := map[string]string{
		ocispec.AnnotationCreated: created,
		ocispec.AnnotationTitle:   m.Recipe.Name + "/" + m.Target.Name,
		AnnotationRecipe:          m.Recipe.Name,
		AnnotationTarget:          m.Target.Name,
		AnnotationFormat:          m.Target.Format,
		AnnotationDevice:          m.Target.Device,
		AnnotationVersion:         m.EdgepipeVersion,
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	if m.Metrics.SizeBytes != nil {
		a[AnnotationSize] = strconv.FormatInt(*m.Metrics.SizeBytes, 10)
	}
	if p := m.Metrics.Perplexity; p != nil {
		a[AnnotationPPL] = num(p.Converted)
		a[AnnotationBaseline] = num(p.Baseline)
		a[AnnotationDelta] = num(p.Delta)
		a[AnnotationVerdict] = p.Verdict
	}
	return a
}

// pushFile uploads a file as the blob d unless the registry has it; the
// registry checks the bytes against d's digest.
func pushFile(ctx context.Context, repo *remote.Repository, d ocispec.Descriptor, p string, uploaded *int) error {
	ok, err := repo.Exists(ctx, d)
	if err != nil {
		return fmt.Errorf("push %s: %w", d.Annotations[ocispec.AnnotationTitle], err)
	}
	if ok {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := repo.Push(ctx, d, f); err != nil {
		return fmt.Errorf("push %s: %w", d.Annotations[ocispec.AnnotationTitle], err)
	}
	*uploaded++
	return nil
}

func pushBytes(ctx context.Context, repo *remote.Repository, mediaType, title string, b []byte, uploaded *int) (ocispec.Descriptor, error) {
	d := content.NewDescriptorFromBytes(mediaType, b)
	d.Annotations = map[string]string{ocispec.AnnotationTitle: title}
	ok, err := repo.Exists(ctx, d)
	if err != nil {
		return d, fmt.Errorf("push %s: %w", title, err)
	}
	if !ok {
		if err := repo.Push(ctx, d, bytes.NewReader(b)); err != nil {
			return d, fmt.Errorf("push %s: %w", title, err)
		}
		*uploaded++
	}
	return d, nil
}

// maxManifestBytes bounds what is read of a manifest: a hostile registry
// cannot make a pull buffer gigabytes.
const maxManifestBytes = 4 << 20

// Pull downloads the artifact ref into the folder dest, which must not
// exist or be an artifact folder (it is replaced atomically), and verifies
// every file against its digest and the folder against its manifest. The
// provenance and signature referrers come back as the sidecar files.
// It returns the model manifest's descriptor.
func Pull(ctx context.Context, ref registry.Reference, dest string, opt Options) (ocispec.Descriptor, error) {
	d, err := pull(ctx, ref, dest, opt)
	return d, explain(ref, err)
}

func pull(ctx context.Context, ref registry.Reference, dest string, opt Options) (ocispec.Descriptor, error) {
	if st, err := os.Stat(dest); err == nil {
		if _, err := os.Stat(filepath.Join(dest, manifest.FileName)); err != nil || !st.IsDir() {
			return ocispec.Descriptor{}, fmt.Errorf("pull into %s: it exists and is not an artifact folder; name a new folder", dest)
		}
	}
	repo, err := opt.repository(ref)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc, mb, err := fetchManifest(ctx, repo, ref.Reference)
	if errors.Is(err, errdef.ErrNotFound) {
		return desc, fmt.Errorf("pull %s: the registry has no such artifact: check the repository and tag (run pushes a target to the tag its publish: entry names, else the target's name)", ref)
	}
	if err != nil {
		return desc, fmt.Errorf("pull %s: %w", ref, err)
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(mb, &man); err != nil {
		return desc, fmt.Errorf("pull %s: the manifest is not JSON: %w", ref, err)
	}
	if man.ArtifactType != ArtifactType {
		return desc, fmt.Errorf("pull %s: artifact type %q is not an edgepipe artifact (%s)", ref, man.ArtifactType, ArtifactType)
	}

	if err := manifest.CleanStale(filepath.Dir(filepath.Clean(dest))); err != nil {
		return desc, err
	}
	staging, err := manifest.Stage(dest)
	if err != nil {
		return desc, err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(staging)
		}
	}()
	seen := map[string]bool{}
	for _, l := range man.Layers {
		title := l.Annotations[ocispec.AnnotationTitle]
		if err := checkTitle(title); err != nil {
			return desc, fmt.Errorf("pull %s: layer %s: %w", ref, l.Digest, err)
		}
		if seen[title] {
			return desc, fmt.Errorf("pull %s: two layers are titled %s", ref, title)
		}
		seen[title] = true
		if err := fetchTo(ctx, repo, l, filepath.Join(staging, filepath.FromSlash(title))); err != nil {
			return desc, fmt.Errorf("pull %s: %s: %w", ref, title, err)
		}
	}
	if !seen[manifest.FileName] {
		return desc, fmt.Errorf("pull %s: the artifact has no %s layer", ref, manifest.FileName)
	}
	for _, side := range []struct{ file, artifactType string }{
		{manifest.ProvenanceFile, ProvenanceArtifactType},
		{manifest.SignatureFile, BundleArtifactType},
	} {
		if err := pullReferrer(ctx, repo, desc, side.artifactType, staging, side.file); err != nil {
			return desc, fmt.Errorf("pull %s: %s: %w", ref, side.file, err)
		}
	}
	if opt.Accept != nil {
		if err := opt.Accept(staging); err != nil {
			return desc, fmt.Errorf("pull %s: %w; nothing was written to %s", ref, err, dest)
		}
	}
	// Publish re-hashes every file against the pulled manifest.json.
	if err := manifest.PublishContext(ctx, staging, dest); err != nil {
		return desc, err
	}
	done = true
	return desc, nil
}

func fetchManifest(ctx context.Context, repo *remote.Repository, reference string) (ocispec.Descriptor, []byte, error) {
	desc, rc, err := repo.FetchReference(ctx, reference)
	if err != nil {
		return desc, nil, err
	}
	defer rc.Close()
	if desc.Size > maxManifestBytes {
		return desc, nil, fmt.Errorf("the manifest is %d bytes, over the %d this reads", desc.Size, maxManifestBytes)
	}
	b, err := content.ReadAll(rc, desc)
	return desc, b, err
}

// checkTitle accepts only relative paths that stay inside the folder and
// are not the sidecars (which come from referrers): a hostile artifact
// cannot write elsewhere.
func checkTitle(title string) error {
	if manifest.CheckRelPath(title) != nil {
		return fmt.Errorf("title %q is not a relative path inside the folder", title)
	}
	if manifest.IsSidecar(title) {
		return fmt.Errorf("title %q names a file that only a referrer may carry", title)
	}
	return nil
}

// fetchTo streams the blob d into a new file at p, checking its digest and
// size as it goes.
func fetchTo(ctx context.Context, repo *remote.Repository, d ocispec.Descriptor, p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	rc, err := repo.Fetch(ctx, d)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	vr := content.NewVerifyReader(rc, d)
	if _, err := io.Copy(f, vr); err != nil {
		f.Close()
		return err
	}
	if err := vr.Verify(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// pullReferrer writes the newest referrer of the given type (one layer) as
// the sidecar file name of dir; none is not an error (an unsigned artifact
// has no bundle).
func pullReferrer(ctx context.Context, repo *remote.Repository, subject ocispec.Descriptor, artifactType, dir, name string) error {
	var found []ocispec.Descriptor
	err := repo.Referrers(ctx, subject, artifactType, func(refs []ocispec.Descriptor) error {
		found = append(found, refs...)
		return nil
	})
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return nil
	}
	// Several attachments of one kind for one subject: edgepipe stamps them
	// with the folder's manifest time (so pushes stay idempotent), which is
	// the same for all of them, so this orders only foreign attachments and
	// otherwise keeps the registry's order. Whichever is taken, the caller's
	// provenance and --key checks judge it before anything is published.
	sort.SliceStable(found, func(i, j int) bool {
		return found[i].Annotations[ocispec.AnnotationCreated] > found[j].Annotations[ocispec.AnnotationCreated]
	})
	_, mb, err := fetchManifest(ctx, repo, found[0].Digest.String())
	if err != nil {
		return err
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(mb, &man); err != nil {
		return err
	}
	if len(man.Layers) != 1 {
		return fmt.Errorf("the %s referrer has %d layers, want 1", artifactType, len(man.Layers))
	}
	l := man.Layers[0]
	if l.Size > maxManifestBytes {
		return fmt.Errorf("the %s layer is %d bytes, over the %d this reads", artifactType, l.Size, maxManifestBytes)
	}
	rc, err := repo.Fetch(ctx, l)
	if err != nil {
		return err
	}
	defer rc.Close()
	b, err := content.ReadAll(rc, l)
	if err != nil {
		return err
	}
	return manifest.WriteSidecar(dir, name, b)
}

// explain adds what to do to the errors a user can fix.
func explain(ref registry.Reference, err error) error {
	var re *errcode.ErrorResponse
	switch {
	case err == nil:
		return nil
	case errors.Is(err, auth.ErrBasicCredentialNotFound),
		errors.As(err, &re) && (re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden):
		return fmt.Errorf("%w: the registry %s wants credentials that allow this; log in with `docker login %s` (or `oras login`): edgepipe reads the Docker config ($DOCKER_CONFIG/config.json, else ~/.docker/config.json)", err, ref.Registry, ref.Registry)
	}
	return err
}

// Repository opens the repository of ref (its tag is ignored) for
// object-level access, with the Docker config's credentials unless opt
// gives others: the remote cache's OCI store.
func Repository(ref registry.Reference, opt Options) (*remote.Repository, error) {
	return opt.repository(ref)
}
