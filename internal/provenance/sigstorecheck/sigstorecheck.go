// Package sigstorecheck verifies a Sigstore bundle with sigstore-go, the
// library cosign verifies with, so tests check edgepipe's signatures with
// a standard verifier rather than only with edgepipe's own code. Only tests
// import it: edgepipe itself does not link sigstore-go.
package sigstorecheck

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Verify checks the bundle at path with sigstore-go against the trusted
// public key, which it finds by the bundle's key hint. A key-signed bundle
// has no transparency log entry or timestamp, so none is required. The
// policy requires artifactSHA256 (hex) to be a subject of the signed
// in-toto statement; Verify returns the statement's predicate type.
func Verify(path string, trusted crypto.PublicKey, artifactSHA256 string) (string, error) {
	b, err := bundle.LoadJSONFromPath(path)
	if err != nil {
		return "", fmt.Errorf("load bundle: %w", err)
	}
	v, err := signature.LoadVerifier(trusted, crypto.SHA256)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKIXPublicKey(trusted)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	hint := base64.StdEncoding.EncodeToString(sum[:])
	keys := root.NewTrustedPublicKeyMaterialFromMapping(map[string]*root.ExpiringKey{hint: root.NewExpiringKey(v, time.Time{}, time.Time{})})
	verifier, err := verify.NewVerifier(keys, verify.WithNoObserverTimestamps())
	if err != nil {
		return "", err
	}
	digest, err := hex.DecodeString(artifactSHA256)
	if err != nil {
		return "", err
	}
	res, err := verifier.Verify(b, verify.NewPolicy(verify.WithArtifactDigest("sha256", digest), verify.WithKey()))
	if err != nil {
		return "", err
	}
	if res.Statement == nil {
		return "", fmt.Errorf("verified, but the bundle holds no in-toto statement")
	}
	return res.Statement.PredicateType, nil
}
