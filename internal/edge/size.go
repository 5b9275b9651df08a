package edge

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/manifest"
)

// TargetSize is the published artifact's size when there is one, else
// parameters x the format's bits a weight.
func TargetSize(dir, format string, model Model) (float64, string) {
	m, err := manifest.Read(dir)
	if err == nil && m.Metrics.SizeBytes != nil && *m.Metrics.SizeBytes > 0 {
		return float64(*m.Metrics.SizeBytes) / 1e9, fmt.Sprintf("published (%s metrics.size_bytes)", filepath.Join(dir, manifest.FileName))
	}
	f, ferr := catalog.ParseFormat(format)
	if ferr != nil || !model.HasParams() {
		why := "not published yet, and the model's parameter count is unknown at plan time"
		if len(model.Notes) > 0 {
			why += " (" + strings.Join(model.Notes, "; ") + ")"
		}
		return 0, why
	}
	return catalog.EstimateWeightsGB(model.Shape.Params, f),
		fmt.Sprintf("estimated (not published yet): %s parameters x %g bits a weight", Params(model.Shape.Params), f.BitsPerWeight)
}
