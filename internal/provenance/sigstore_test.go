package provenance_test

// The bundle edgepipe writes must verify with Sigstore's own Go library,
// the verifier cosign is built on, not only with this package's code.

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/provenance"
	"github.com/edgepipe/edgepipe/internal/provenance/sigstorecheck"
)

func TestSigstoreGoVerifiesBundle(t *testing.T) {
	keys := map[string]func() (any, error){
		"ecdsa-p256": func() (any, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) },
		"ed25519": func() (any, error) {
			_, k, err := ed25519.GenerateKey(rand.Reader)
			return k, err
		},
	}
	newSigner := func(t *testing.T, kind string) *provenance.Signer {
		k, err := keys[kind]()
		if err != nil {
			t.Fatal(err)
		}
		s, err := provenance.NewSigner(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for kind := range keys {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "model.gguf"), []byte("weights"), 0o644); err != nil {
				t.Fatal(err)
			}
			m := &manifest.Manifest{EdgepipeVersion: "test", Recipe: manifest.Recipe{Name: "r"},
				Target: manifest.Target{Name: "t", Device: "x86-laptop", Format: "gguf-q8_0"}, Source: manifest.Source{URI: "./model"}}
			if err := manifest.Write(dir, m); err != nil {
				t.Fatal(err)
			}
			st, err := provenance.New(dir, m, provenance.Run{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := newSigner(t, kind)
			if err := provenance.Write(dir, st, s); err != nil {
				t.Fatal(err)
			}
			bundle := filepath.Join(dir, manifest.SignatureFile)
			model := m.Files[0].SHA256
			pt, err := sigstorecheck.Verify(bundle, s.Public(), model)
			if err != nil {
				t.Fatalf("sigstore-go rejects the bundle: %v", err)
			}
			if pt != provenance.PredicateType {
				t.Fatalf("predicate type %s", pt)
			}
			// The same verifier refuses another key and a digest that is no subject.
			if _, err := sigstorecheck.Verify(bundle, newSigner(t, kind).Public(), model); err == nil {
				t.Fatal("sigstore-go accepted the bundle with another key")
			}
			if _, err := sigstorecheck.Verify(bundle, s.Public(), strings.Repeat("00", 32)); err == nil {
				t.Fatal("sigstore-go accepted a digest that is not a subject")
			}
		})
	}
}
