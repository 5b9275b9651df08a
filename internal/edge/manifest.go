package edge

import "github.com/edgepipe/edgepipe/internal/manifest"

// ManifestMemoryFit is the pre-flight as the manifest records it; nil when
// the pre-flight could not run.
func (p Prediction) ManifestMemoryFit() *manifest.MemoryFit {
	mc := p.Memory
	if mc == nil {
		return nil
	}
	bytes := func(gb float64) int64 { return int64(gb*1e9 + 0.5) }
	return &manifest.MemoryFit{
		Device:         mc.Device,
		WeightsBytes:   bytes(mc.WeightsGB),
		KVCacheBytes:   bytes(mc.KVGB),
		OverheadBytes:  bytes(mc.OverheadGB),
		TotalBytes:     bytes(mc.NeedGB),
		AvailableBytes: bytes(mc.AvailableGB),
		Context:        mc.Context,
		KVDtype:        mc.KVDtype,
		Fits:           mc.Fits,
	}
}

// ManifestBudgets are the target's budgets with their plan-time
// predictions; nil when the target sets none. Actual values are the
// measuring steps' to fill in.
func (p Prediction) ManifestBudgets() *manifest.Budgets {
	if len(p.Budgets) == 0 {
		return nil
	}
	var out manifest.Budgets
	for _, b := range p.Budgets {
		mb := &manifest.Budget{Limit: b.Limit}
		if b.Predicted != nil {
			v := *b.Predicted
			mb.Predicted = &v
		}
		switch b.Name {
		case BudgetMinTokensPerS:
			out.MinTokensPerS = mb
		case BudgetMaxMemoryGB:
			out.MaxMemoryGB = mb
		case BudgetMaxFirstTokenMS:
			out.MaxFirstTokenMS = mb
		}
	}
	return &out
}
