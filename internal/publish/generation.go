package publish

import (
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/steps"
)

// generation is what the target's decode check measured, for the
// manifest's metrics.generation; its verdicts are the check step's Checks,
// which judge already applied.
func generation(ins []*steps.Output) *manifest.Generation {
	for _, in := range ins {
		if in.Result != nil && in.Result.Generation != nil {
			g := *in.Result.Generation
			return &g
		}
	}
	return nil
}
