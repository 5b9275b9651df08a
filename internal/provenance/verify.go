package provenance

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/manifest"
)

// Write writes st into dir as provenance.intoto.json and, with a signer,
// its signature bundle as provenance.sigstore.json; without one it removes
// a stale bundle, which would sign other bytes. Call it after the manifest
// is written and before the folder is published.
func Write(dir string, st *Statement, signer *Signer) error {
	data, err := marshalJSON(st)
	if err != nil {
		return fmt.Errorf("provenance: %w", err)
	}
	if err := manifest.WriteSidecar(dir, manifest.ProvenanceFile, data); err != nil {
		return fmt.Errorf("provenance: %w", err)
	}
	if signer == nil {
		if err := os.Remove(filepath.Join(dir, manifest.SignatureFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("provenance: %w", err)
		}
		return nil
	}
	bundle, err := signer.SignStatement(data)
	if err != nil {
		return err
	}
	if err := manifest.WriteSidecar(dir, manifest.SignatureFile, bundle); err != nil {
		return fmt.Errorf("provenance: %w", err)
	}
	return nil
}

// Result is what Check found.
type Result struct {
	// HasProvenance and Signed say which sidecars the folder holds.
	HasProvenance bool
	Subjects      int
	Signed        bool
	// KeyHint is the bundle's key hint, when signed.
	KeyHint string
	// SignatureChecked is true when a key was given and the signature
	// verified with it.
	SignatureChecked bool
	// Problems are sentences; none means the sidecars match the folder.
	Problems []string
}

// Check compares dir's provenance with its manifest: every file the
// manifest lists and manifest.json itself must be a subject with the same
// sha256, and nothing else. When the folder is signed, the bundle must sign
// exactly provenance.intoto.json's bytes; with pub, the signature must
// verify with it, and a folder that is not signed is a problem. Check does
// not re-hash the listed files: manifest.Verify does that.
func Check(dir string, pub crypto.PublicKey) (*Result, error) {
	m, err := manifest.Read(dir)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	problem := func(format string, args ...any) { res.Problems = append(res.Problems, fmt.Sprintf(format, args...)) }

	stmt, err := boundedfile.Read(filepath.Join(dir, manifest.ProvenanceFile), boundedfile.SidecarLimit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		switch {
		case slices.Contains(m.Sidecars, manifest.ProvenanceFile):
			problem("%s is missing: the manifest says the folder was published with it", manifest.ProvenanceFile)
		case pub != nil:
			problem("%s is missing: the folder has no provenance to check the signature of", manifest.ProvenanceFile)
		}
	case err != nil:
		return nil, fmt.Errorf("provenance: %w", err)
	default:
		res.HasProvenance = true
		mb, err := boundedfile.Read(filepath.Join(dir, manifest.FileName), boundedfile.ManifestLimit)
		if err != nil {
			return nil, fmt.Errorf("provenance: %w", err)
		}
		sum := sha256.Sum256(mb)
		want := map[string]string{manifest.FileName: hex.EncodeToString(sum[:])}
		for _, f := range m.Files {
			want[f.Path] = f.SHA256
		}
		res.Subjects = checkStatement(stmt, want, problem)
	}

	bundle, err := boundedfile.Read(filepath.Join(dir, manifest.SignatureFile), boundedfile.SidecarLimit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		switch {
		case slices.Contains(m.Sidecars, manifest.SignatureFile):
			problem("%s is missing: the manifest says the folder was published signed", manifest.SignatureFile)
		case pub != nil:
			problem("%s is missing: the folder is not signed", manifest.SignatureFile)
		}
		return res, nil
	case err != nil:
		return nil, fmt.Errorf("provenance: %w", err)
	}
	res.Signed = true
	b, err := ParseBundle(bundle)
	if err != nil {
		problem("%s: %v", manifest.SignatureFile, err)
		return res, nil
	}
	if b.VerificationMaterial.PublicKey != nil {
		res.KeyHint = b.VerificationMaterial.PublicKey.Hint
	}
	if res.HasProvenance && !bytes.Equal(b.DSSEEnvelope.Payload, stmt) {
		got := sha256.Sum256(b.DSSEEnvelope.Payload)
		want := sha256.Sum256(stmt)
		problem("%s signs a statement with sha256 %s, but %s has sha256 %s: one of them was changed after signing",
			manifest.SignatureFile, hex.EncodeToString(got[:]), manifest.ProvenanceFile, hex.EncodeToString(want[:]))
	}
	if pub == nil {
		return res, nil
	}
	hint, err := KeyHint(pub)
	if err != nil {
		return nil, err
	}
	if err := VerifyEnvelope(b.DSSEEnvelope, pub); err != nil {
		if res.KeyHint != "" && res.KeyHint != hint {
			problem("%s: the signature does not verify: it was made by the key with hint %s, and the given key's hint is %s", manifest.SignatureFile, res.KeyHint, hint)
		} else {
			problem("%s: %v", manifest.SignatureFile, err)
		}
		return res, nil
	}
	res.SignatureChecked = true
	return res, nil
}

// checkStatement compares a statement's subjects with the digests the
// folder should have and returns how many subjects it has.
func checkStatement(data []byte, want map[string]string, problem func(string, ...any)) int {
	var st Statement
	if err := json.Unmarshal(data, &st); err != nil {
		problem("%s is not valid JSON: %v", manifest.ProvenanceFile, err)
		return 0
	}
	if st.Type != StatementType {
		problem("%s: _type is %q, not %s", manifest.ProvenanceFile, st.Type, StatementType)
	}
	if st.PredicateType != PredicateType {
		problem("%s: predicateType is %q, not %s", manifest.ProvenanceFile, st.PredicateType, PredicateType)
	}
	seen := map[string]bool{}
	for _, s := range st.Subject {
		w, ok := want[s.Name]
		switch {
		case seen[s.Name]:
			problem("%s: subject %s appears twice", manifest.ProvenanceFile, s.Name)
		case !ok:
			problem("%s: subject %s is not a file of the folder's manifest", manifest.ProvenanceFile, s.Name)
		case s.Digest["sha256"] != w:
			problem("%s: subject %s has sha256 %q, but the folder's is %s", manifest.ProvenanceFile, s.Name, s.Digest["sha256"], w)
		}
		seen[s.Name] = true
	}
	var missing []string
	for name := range want {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	for _, name := range missing {
		problem("%s: %s is not a subject", manifest.ProvenanceFile, name)
	}
	return len(st.Subject)
}
