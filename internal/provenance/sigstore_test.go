package provenance

// The bundle edgepipe writes must verify with Sigstore's own Go library,
// the verifier cosign is built on, not only with this package's code.

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// sigstoreVerify checks the folder's bundle with sigstore-go against the
// trusted key: the key is looked up by the bundle's hint; no transparency
// log or timestamp is required (a key-signed bundle has none). The policy
// requires artifactSHA256 to be one of the statement's subjects.
func sigstoreVerify(dir string, trusted crypto.PublicKey, artifactSHA256 string) error {
	b, err := bundle.LoadJSONFromPath(filepath.Join(dir, manifest.SignatureFile))
	if err != nil {
		return fmt.Errorf("load bundle: %w", err)
	}
	v, err := signature.LoadVerifier(trusted, crypto.SHA256)
	if err != nil {
		return err
	}
	hint, err := KeyHint(trusted)
	if err != nil {
		return err
	}
	keys := root.NewTrustedPublicKeyMaterialFromMapping(map[string]*root.ExpiringKey{hint: root.NewExpiringKey(v, time.Time{}, time.Time{})})
	verifier, err := verify.NewVerifier(keys, verify.WithNoObserverTimestamps())
	if err != nil {
		return err
	}
	digest, err := hex.DecodeString(artifactSHA256)
	if err != nil {
		return err
	}
	res, err := verifier.Verify(b, verify.NewPolicy(verify.WithArtifactDigest("sha256", digest), verify.WithKey()))
	if err != nil {
		return err
	}
	if res.Statement == nil || res.Statement.PredicateType != PredicateType {
		return fmt.Errorf("verified, but the statement is %v", res.Statement)
	}
	return nil
}

func TestSigstoreGoVerifiesBundle(t *testing.T) {
	ed := func(t *testing.T) *Signer {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		must(t, err)
		s, err := NewSigner(k)
		must(t, err)
		return s
	}
	for name, newSigner := range map[string]func(*testing.T) *Signer{"ecdsa-p256": ecdsaSigner, "ed25519": ed} {
		t.Run(name, func(t *testing.T) {
			dir, m := artifact(t)
			s := newSigner(t)
			must(t, Write(dir, statement(t, dir, m), s))
			model := m.Files[len(m.Files)-1]
			if model.Path != "model-q4_k_m.gguf" {
				t.Fatalf("fixture: last file is %s", model.Path)
			}
			if err := sigstoreVerify(dir, s.Public(), model.SHA256); err != nil {
				t.Fatalf("sigstore-go rejects the bundle: %v", err)
			}
			// The same verifier refuses another key and a digest that is no subject.
			if err := sigstoreVerify(dir, newSigner(t).Public(), model.SHA256); err == nil {
				t.Fatal("sigstore-go accepted the bundle with another key")
			}
			if err := sigstoreVerify(dir, s.Public(), strings.Repeat("00", 32)); err == nil {
				t.Fatal("sigstore-go accepted a digest that is not a subject")
			}
		})
	}
}
