package remotecache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	orasremote "oras.land/oras-go/v2/registry/remote"
)

// ociBackend keeps the remote cache in an OCI registry repository: each
// object is a blob (its name is already its sha256 digest), and a record
// is a small artifact manifest tagged ac-KEY whose one layer is the
// record's envelope. Registries have no conditional tag write: put with
// ifAbsent checks the tag first (check, then put), so two writers racing
// within that window both write, and the last tag wins; both records list
// the same outputs when the step is reproducible, and readers check every
// object against whichever record they read.
type ociBackend struct {
	repo *orasremote.Repository
	url  string
}

func (o *ociBackend) String() string { return o.url }

const casPrefix = "cas/sha256/"

// tag is the record's tag: ac-KEY (keys are 64 hex digits; tags may hold 128).
func recordTag(name string) (string, bool) {
	key, ok := strings.CutPrefix(name, "ac/")
	if !ok {
		return "", false
	}
	return "ac-" + strings.TrimSuffix(key, ".json"), true
}

func blobDesc(name string, size int64) (ocispec.Descriptor, bool) {
	hex, ok := strings.CutPrefix(name, casPrefix)
	if !ok {
		return ocispec.Descriptor{}, false
	}
	return ocispec.Descriptor{MediaType: "application/octet-stream", Digest: digest.NewDigestFromEncoded(digest.SHA256, hex), Size: size}, true
}

func (o *ociBackend) get(ctx context.Context, name string, limit int64) (obj, error) {
	if d, ok := blobDesc(name, limit); ok {
		rc, err := o.repo.Blobs().Fetch(ctx, d)
		if errors.Is(err, errdef.ErrNotFound) {
			return nil, errNotFound
		}
		return rc, err
	}
	tag, ok := recordTag(name)
	if !ok {
		return nil, fmt.Errorf("no object %s in an OCI remote cache", name)
	}
	desc, rc, err := o.repo.FetchReference(ctx, tag)
	if errors.Is(err, errdef.ErrNotFound) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if desc.Size > recordLimit {
		return nil, fmt.Errorf("the record's manifest is %d bytes", desc.Size)
	}
	b, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil || len(m.Layers) != 1 || m.Layers[0].Size > limit {
		return nil, fmt.Errorf("the record's manifest is not one edgepipe writes")
	}
	layer, err := o.repo.Blobs().Fetch(ctx, m.Layers[0])
	if err != nil {
		return nil, err
	}
	defer layer.Close()
	rec, err := content.ReadAll(layer, m.Layers[0])
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(rec)), nil
}

func (o *ociBackend) exists(ctx context.Context, name string, size int64) (bool, error) {
	if d, ok := blobDesc(name, size); ok {
		return o.repo.Blobs().Exists(ctx, d)
	}
	tag, ok := recordTag(name)
	if !ok {
		return false, fmt.Errorf("no object %s in an OCI remote cache", name)
	}
	_, err := o.repo.Resolve(ctx, tag)
	if errors.Is(err, errdef.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (o *ociBackend) put(ctx context.Context, name string, r io.ReadSeeker, size int64, sha256Hex string, ifAbsent bool) error {
	if d, ok := blobDesc(name, size); ok {
		err := o.repo.Blobs().Push(ctx, d, r)
		if errors.Is(err, errdef.ErrAlreadyExists) {
			return nil
		}
		return err
	}
	tag, ok := recordTag(name)
	if !ok {
		return fmt.Errorf("no object %s in an OCI remote cache", name)
	}
	if ifAbsent {
		if ok, err := o.exists(ctx, name, -1); err != nil || ok {
			if ok {
				return errExists
			}
			return err
		}
	}
	rec, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	layer := content.NewDescriptorFromBytes(RecordType, rec)
	config := ocispec.DescriptorEmptyJSON
	for _, b := range []struct {
		d    ocispec.Descriptor
		data []byte
	}{{layer, rec}, {config, config.Data}} {
		if err := o.repo.Blobs().Push(ctx, b.d, bytes.NewReader(b.data)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
			return err
		}
	}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: RecordType, Config: config, Layers: []ocispec.Descriptor{layer}}
	mb, err := json.Marshal(m)
	if err != nil {
		return err
	}
	md := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, mb)
	return o.repo.PushReference(ctx, md, bytes.NewReader(mb), tag)
}
