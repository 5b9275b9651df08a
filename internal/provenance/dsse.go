package provenance

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/edgepipe/edgepipe/internal/jsonfile"
)

// PayloadType is the DSSE payload type of an in-toto statement.
const PayloadType = "application/vnd.in-toto+json"

// Envelope is a DSSE envelope. []byte fields are standard base64 in JSON,
// as DSSE and the Sigstore bundle's protobuf JSON both write them.
type Envelope struct {
	Payload     []byte      `json:"payload"`
	PayloadType string      `json:"payloadType"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one DSSE signature.
type Signature struct {
	Sig   []byte `json:"sig"`
	KeyID string `json:"keyid,omitempty"`
}

// PAE is DSSE's pre-authentication encoding: what is actually signed, so a
// signature over one payload type cannot be replayed as another.
func PAE(payloadType string, payload []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "DSSEv1 %d %s %d ", len(payloadType), payloadType, len(payload))
	b.Write(payload)
	return b.Bytes()
}

// Signer signs provenance with a private key: ECDSA P-256 (SHA-256) or
// ed25519, the two key types cosign and sigstore-go verify DSSE with.
type Signer struct {
	key crypto.Signer
	// Hint names the public key in the bundle: base64 of the SHA-256 of its
	// PKIX DER form, as sigstore-go writes it.
	Hint string
}

// SigningKeyEnv holds the signing key when --sign-key is not given: a path
// to a PEM file, or the PEM itself (CI secrets are often stored as text).
const SigningKeyEnv = "EDGEPIPE_SIGNING_KEY"

// LoadSigner reads a private key from ref: PEM text when it starts with a
// PEM header, else the path of a PEM file. Unencrypted PKCS#8 ("PRIVATE
// KEY") and SEC 1 ("EC PRIVATE KEY") are read; encrypted keys, cosign's
// included, are refused with how to decrypt them. Errors never include the
// key's bytes.
func LoadSigner(ref string) (*Signer, error) {
	data := []byte(ref)
	what := "(PEM text)"
	if !strings.Contains(ref, "\n") {
		// A secret pasted as one line keeps its newlines as "\n".
		data = []byte(strings.ReplaceAll(ref, `\n`, "\n"))
	}
	if !strings.HasPrefix(strings.TrimSpace(ref), "-----BEGIN") {
		b, err := os.ReadFile(ref)
		if err != nil {
			return nil, fmt.Errorf("signing key: %w", err)
		}
		data, what = b, ref
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("signing key %s is not PEM: give the private key as PEM (-----BEGIN PRIVATE KEY-----)", what)
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "ENCRYPTED PRIVATE KEY", "ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY":
		return nil, fmt.Errorf("signing key %s is encrypted (%s); edgepipe reads unencrypted PKCS#8 keys: write a decrypted copy (openssl pkcs8 -in KEY -out KEY.plain.pem; for a cosign key, generate one with openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256) and keep it in a secret", what, block.Type)
	default:
		return nil, fmt.Errorf("signing key %s holds a %q PEM block, not a private key (PRIVATE KEY or EC PRIVATE KEY)", what, block.Type)
	}
	if err != nil {
		// The parser's message describes the DER it choked on; the key's
		// bytes stay out of errors, so say only what it is not.
		return nil, fmt.Errorf("signing key %s: the %s block is not a valid key of that type", what, block.Type)
	}
	return NewSigner(key)
}

// NewSigner wraps an ECDSA P-256 or ed25519 private key.
func NewSigner(key any) (*Signer, error) {
	var cs crypto.Signer
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("signing key: ECDSA on %s is not supported; use P-256 (or ed25519)", k.Curve.Params().Name)
		}
		cs = k
	case ed25519.PrivateKey:
		cs = k
	default:
		return nil, fmt.Errorf("signing key: %T keys are not supported; use ECDSA P-256 or ed25519", key)
	}
	hint, err := KeyHint(cs.Public())
	if err != nil {
		return nil, err
	}
	return &Signer{key: cs, Hint: hint}, nil
}

// Public returns the signer's public key.
func (s *Signer) Public() crypto.PublicKey { return s.key.Public() }

// KeyHint is the key's name in a bundle: base64(SHA-256(PKIX DER)).
func KeyHint(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

// Sign signs payload as a DSSE envelope of the given type.
func (s *Signer) Sign(payloadType string, payload []byte) (*Envelope, error) {
	msg := PAE(payloadType, payload)
	var sig []byte
	var err error
	switch k := s.key.(type) {
	case ed25519.PrivateKey:
		sig = ed25519.Sign(k, msg)
	case *ecdsa.PrivateKey:
		sum := sha256.Sum256(msg)
		sig, err = ecdsa.SignASN1(rand.Reader, k, sum[:])
	default:
		err = fmt.Errorf("%T keys are not supported", s.key)
	}
	if err != nil {
		return nil, fmt.Errorf("sign provenance: %w", err)
	}
	return &Envelope{Payload: payload, PayloadType: payloadType, Signatures: []Signature{{Sig: sig}}}, nil
}

// ParsePublicKey reads a PEM "PUBLIC KEY" (PKIX) block, as
// `openssl pkey -pubout` and `cosign generate-key-pair` write it.
func ParsePublicKey(data []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("not a PEM file: the public key must be PEM (-----BEGIN PUBLIC KEY-----)")
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("holds a %q PEM block, not a PUBLIC KEY", block.Type)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA on %s is not supported; provenance is signed with P-256 or ed25519", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("%T keys are not supported; provenance is signed with ECDSA P-256 or ed25519", pub)
	}
	return pub, nil
}

// MarshalPublicKey writes pub as a PEM PUBLIC KEY block.
func MarshalPublicKey(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// VerifyEnvelope checks that one of env's signatures is pub's over the
// envelope's payload.
func VerifyEnvelope(env *Envelope, pub crypto.PublicKey) error {
	if len(env.Signatures) == 0 {
		return errors.New("the envelope has no signature")
	}
	msg := PAE(env.PayloadType, env.Payload)
	for _, s := range env.Signatures {
		switch k := pub.(type) {
		case *ecdsa.PublicKey:
			sum := sha256.Sum256(msg)
			if ecdsa.VerifyASN1(k, sum[:], s.Sig) {
				return nil
			}
		case ed25519.PublicKey:
			if ed25519.Verify(k, msg, s.Sig) {
				return nil
			}
		default:
			return fmt.Errorf("%T keys are not supported", pub)
		}
	}
	return errors.New("the signature does not verify with this public key")
}

// marshalJSON is the one encoding of what this package writes (jsonfile's).
func marshalJSON(v any) ([]byte, error) { return jsonfile.Marshal(v) }
