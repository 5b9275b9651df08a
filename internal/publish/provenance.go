package publish

import (
	"fmt"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/provenance"
)

// writeProvenance writes the target's provenance (and, with a signer, its
// signature) into the staged folder after its manifest, and checks the
// result against the manifest, so a folder is never published with
// provenance that does not describe it.
func (p *Publisher) writeProvenance(staging string, m *manifest.Manifest, deps []provenance.ResourceDescriptor) error {
	run := p.Run
	run.FinishedOn = time.Now()
	st, err := provenance.New(staging, m, run, deps)
	if err != nil {
		return err
	}
	if err := provenance.Write(staging, st, p.Signer); err != nil {
		return err
	}
	var pub any
	if p.Signer != nil {
		pub = p.Signer.Public()
	}
	res, err := provenance.Check(staging, pub)
	if err != nil {
		return err
	}
	if len(res.Problems) > 0 {
		return fmt.Errorf("the provenance written does not match the folder: %s", strings.Join(res.Problems, "; "))
	}
	return nil
}

// provenanceCurrent reports whether a published folder's provenance is what
// this run would write: present, and signed by this run's key when it signs.
// A folder published before signing was asked for is published again.
func (p *Publisher) provenanceCurrent(final string) bool {
	res, err := provenance.Check(final, nil)
	if err != nil || !res.HasProvenance || len(res.Problems) > 0 {
		return false
	}
	if p.Signer == nil {
		return true
	}
	return res.Signed && res.KeyHint == p.Signer.Hint
}
