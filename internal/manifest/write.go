package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/jsonfile"
)

// Write lists and hashes every file in dir (all but manifest.json, logs
// included) into m.Files, fills m.ManifestVersion and m.Created when unset,
// puts every time in UTC, validates m and writes dir/manifest.json
// atomically (temp file, fsync, rename). The folder must hold plain files
// only.
func Write(dir string, m *Manifest) error {
	return WriteContext(context.Background(), dir, m)
}

// WriteContext is Write with a context that can stop the hashing.
func WriteContext(ctx context.Context, dir string, m *Manifest) error {
	entries, _, err := walk(ctx, dir)
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	files := make([]File, 0, len(entries))
	for _, e := range entries {
		if !e.mode.IsRegular() {
			return fmt.Errorf("write manifest: %s is a %s; an artifact folder holds plain files only, so copy the file in instead", e.abs, kindOf(e.mode))
		}
		sha, size, err := hashFile(ctx, e.abs, false)
		if err != nil {
			return fmt.Errorf("write manifest: %w", err)
		}
		files = append(files, File{Path: e.rel, SHA256: sha, Size: size})
	}
	m.Files = files
	// Readers get [] rather than null for lists that are merely empty.
	if m.Steps == nil {
		m.Steps = []Step{}
	}
	// Times are written in UTC so manifests from different machines compare
	// as text.
	for i := range m.Steps {
		s := &m.Steps[i]
		if s.Argv == nil {
			s.Argv = [][]string{}
		}
		if !s.Started.IsZero() {
			s.Started = s.Started.UTC()
		}
		if !s.Finished.IsZero() {
			s.Finished = s.Finished.UTC()
		}
	}
	if m.ManifestVersion == 0 {
		m.ManifestVersion = Version
	}
	if m.Created.IsZero() {
		m.Created = time.Now().Truncate(time.Second)
	}
	m.Created = m.Created.UTC()
	if err := m.Validate(); err != nil {
		return fmt.Errorf("write manifest for %s: %w", dir, err)
	}
	data, err := marshal(m)
	if err != nil {
		return fmt.Errorf("write manifest for %s: %w", dir, err)
	}
	if err := writeFileAtomic(filepath.Join(dir, FileName), data); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// Read reads dir/manifest.json. It accepts fields it does not know (later
// versions only add fields) but refuses another manifest_version and any
// listed path that would leave the folder.
func Read(dir string) (*Manifest, error) {
	path := filepath.Join(dir, FileName)
	data, err := boundedfile.Read(path, boundedfile.ManifestLimit)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s has no %s: it is not a published edgepipe artifact folder", dir, FileName)
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	var probe struct {
		ManifestVersion int `json:"manifest_version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %w", path, err)
	}
	switch {
	case probe.ManifestVersion == 0:
		return nil, fmt.Errorf("%s has no manifest_version: it was not written by edgepipe", path)
	case probe.ManifestVersion > Version:
		return nil, fmt.Errorf("%s has manifest_version %d, but this edgepipe reads version %d: use a newer edgepipe", path, probe.ManifestVersion, Version)
	case probe.ManifestVersion != Version:
		return nil, fmt.Errorf("%s has manifest_version %d, which no edgepipe wrote", path, probe.ManifestVersion)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := errors.Join(validateFiles("files", m.Files)...); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &m, nil
}

// marshal is the one JSON encoding of a manifest (jsonfile's).
func marshal(m *Manifest) ([]byte, error) { return jsonfile.Marshal(m) }

// writeFileAtomic writes a manifest or sidecar whole: a reader sees the
// old file or the new one.
func writeFileAtomic(path string, data []byte) error {
	return atomicfile.Write(path, data, 0o644)
}

func kindOf(mode os.FileMode) string {
	switch {
	case mode&os.ModeSymlink != 0:
		return "symlink"
	case mode&os.ModeNamedPipe != 0:
		return "named pipe"
	case mode&os.ModeSocket != 0:
		return "socket"
	case mode&os.ModeDevice != 0:
		return "device"
	default:
		return "special file"
	}
}

// WriteSidecar writes one of the sidecar files (ProvenanceFile,
// SignatureFile) into dir atomically and durably, so a Publish that follows
// never exposes a folder whose sidecar is half written.
func WriteSidecar(dir, name string, data []byte) error {
	if !IsSidecar(name) {
		return fmt.Errorf("write %s: not a sidecar file of an artifact folder", name)
	}
	if err := writeFileAtomic(filepath.Join(dir, name), data); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
