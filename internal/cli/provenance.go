package cli

import (
	"crypto"
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/provenance"
)

// signer loads the provenance signing key from --sign-key, else from
// EDGEPIPE_SIGNING_KEY; neither set means unsigned provenance. A key that
// cannot be used is a usage error: signing was asked for, so publishing
// unsigned would be wrong.
func (c *common) signer(env *Env) (*provenance.Signer, error) {
	ref, from := c.signKey, "--sign-key"
	if ref == "" {
		ref, from = env.Getenv(provenance.SigningKeyEnv), provenance.SigningKeyEnv
	}
	if strings.TrimSpace(ref) == "" {
		return nil, nil
	}
	s, err := provenance.LoadSigner(ref)
	if err != nil {
		return nil, usageErr("%s: %v", from, err)
	}
	return s, nil
}

// loadPublicKey reads verify's --key.
func loadPublicKey(path string) (crypto.PublicKey, error) {
	b, err := boundedfile.Read(path, boundedfile.LockLimit)
	if err != nil {
		return nil, usageErr("--key: %v", err)
	}
	pub, err := provenance.ParsePublicKey(b)
	if err != nil {
		return nil, usageErr("--key %s: %v", path, err)
	}
	return pub, nil
}

// provenanceSummary says what verify checked beyond the files.
func provenanceSummary(r *provenance.Result) string {
	if !r.HasProvenance && !r.Signed {
		return "no provenance (published by an older edgepipe)"
	}
	parts := []string{fmt.Sprintf("provenance matches (%d subjects)", r.Subjects)}
	switch {
	case r.SignatureChecked:
		parts = append(parts, "signature verified (key "+r.KeyHint+")")
	case r.Signed:
		parts = append(parts, "signed by key "+r.KeyHint+", signature not checked: pass --key PUB.pem")
	default:
		parts = append(parts, "unsigned")
	}
	return strings.Join(parts, "; ")
}
