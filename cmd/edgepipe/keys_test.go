package main

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"os"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/edgepipe/edgepipe/internal/provenance"
	"github.com/edgepipe/edgepipe/internal/provenance/sigstorecheck"
)

// genKey writes a fresh key pair for signing tests: genkey [-ed25519] NAME
// writes NAME.pem (unencrypted PKCS#8, what --sign-key reads) and NAME.pub
// (PKIX, what verify --key reads), as openssl genpkey / pkey -pubout would.
func genKey(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: genkey [-ed25519] NAME")
	}
	var key any
	var err error
	if args[0] == "-ed25519" {
		_, key, err = ed25519.GenerateKey(rand.Reader)
		args = args[1:]
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	ts.Check(err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	ts.Check(err)
	s, err := provenance.NewSigner(key)
	ts.Check(err)
	pub, err := provenance.MarshalPublicKey(s.Public())
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]+".pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	ts.Check(os.WriteFile(ts.MkAbs(args[0]+".pub"), pub, 0o644))
}

// sigstoreVerify checks a bundle with sigstore-go, the standard verifier:
// sigstore-verify BUNDLE PUB.pem FILE passes when the bundle's signature
// verifies with the key and FILE's sha256 is a subject of the statement.
func sigstoreVerify(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: sigstore-verify BUNDLE PUB.pem FILE")
	}
	pubPEM, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	pub, err := provenance.ParsePublicKey(pubPEM)
	ts.Check(err)
	body, err := os.ReadFile(ts.MkAbs(args[2]))
	ts.Check(err)
	sum := sha256.Sum256(body)
	pt, err := sigstorecheck.Verify(ts.MkAbs(args[0]), pub, hex.EncodeToString(sum[:]))
	switch {
	case neg && err == nil:
		ts.Fatalf("sigstore-go verified %s, want a failure", args[0])
	case neg:
		ts.Logf("sigstore-go: %v", err)
	case err != nil:
		ts.Fatalf("sigstore-go: %v", err)
	default:
		ts.Logf("sigstore-go verified %s (%s)", args[0], pt)
	}
}
