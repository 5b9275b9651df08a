package provenance

import (
	"encoding/json"
	"fmt"
)

// BundleMediaType is the Sigstore bundle version written: v0.3 carries a
// DSSE envelope and a public-key hint, and needs no transparency log entry.
const BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// Bundle is the protobuf-JSON form of a Sigstore bundle with a DSSE
// envelope, the fields edgepipe writes and reads. Unknown fields (a
// transparency log entry added by another tool) are ignored on reading.
type Bundle struct {
	MediaType            string               `json:"mediaType"`
	VerificationMaterial VerificationMaterial `json:"verificationMaterial"`
	DSSEEnvelope         *Envelope            `json:"dsseEnvelope,omitempty"`
}

// VerificationMaterial names the key that signed: a hint, not the key, so
// the verifier must bring the key it trusts.
type VerificationMaterial struct {
	PublicKey *PublicKeyIdentifier `json:"publicKey,omitempty"`
}

// PublicKeyIdentifier is the bundle's key hint.
type PublicKeyIdentifier struct {
	Hint string `json:"hint,omitempty"`
}

// SignStatement signs the statement's exact bytes (as written to
// provenance.intoto.json) and wraps the envelope in a bundle.
func (s *Signer) SignStatement(statement []byte) ([]byte, error) {
	env, err := s.Sign(PayloadType, statement)
	if err != nil {
		return nil, err
	}
	b := Bundle{
		MediaType:            BundleMediaType,
		VerificationMaterial: VerificationMaterial{PublicKey: &PublicKeyIdentifier{Hint: s.Hint}},
		DSSEEnvelope:         env,
	}
	return marshalJSON(b)
}

// ParseBundle reads a bundle and checks it is one edgepipe can verify: v0.3
// with a DSSE envelope of an in-toto statement.
func ParseBundle(data []byte) (*Bundle, error) {
	var b Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("not a Sigstore bundle: %w", err)
	}
	if b.MediaType != BundleMediaType {
		return nil, fmt.Errorf("bundle media type %q is not %s", b.MediaType, BundleMediaType)
	}
	if b.DSSEEnvelope == nil {
		return nil, fmt.Errorf("the bundle holds no DSSE envelope")
	}
	if b.DSSEEnvelope.PayloadType != PayloadType {
		return nil, fmt.Errorf("the bundle's payload type %q is not %s", b.DSSEEnvelope.PayloadType, PayloadType)
	}
	return &b, nil
}
