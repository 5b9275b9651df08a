package catalog

import "math"

// DecodeCeiling is the bandwidth bound on decode speed in tokens per second:
// generating one token reads every weight once, so a device cannot decode
// faster than its memory bandwidth divided by the model's size. It returns 0
// when either input is not positive.
func DecodeCeiling(bandwidthGBs, modelGB float64) float64 {
	if bandwidthGBs <= 0 || modelGB <= 0 {
		return 0
	}
	return bandwidthGBs / modelGB
}

// CeilingRow compares one device's bandwidth ceiling with what was observed.
type CeilingRow struct {
	Device       string  `json:"device"`
	BandwidthGBs float64 `json:"bandwidth_gb_s"`
	ModelGB      float64 `json:"model_gb"`
	CeilingTokS  float64 `json:"ceiling_tok_s"`
	// ObservedTokS is 0 when no observation of a model this size exists.
	ObservedTokS float64 `json:"observed_tok_s"`
	// ObservedOverCeiling is observed / ceiling, 0 without an observation.
	// It is not clamped: a figure above 1 means the observation read fewer
	// bytes per token than the model's size (or the figure is off).
	ObservedOverCeiling float64 `json:"observed_over_ceiling"`
}

// observationMatchTolerance: an observation counts for a model size within
// 10%, so a 4.7 GB measurement stands for "an 8B model at 4 bits" whether the
// file at hand is 4.58 GiB or 4.92 GB.
const observationMatchTolerance = 0.10

// Ceilings computes the decode ceiling of a modelGB model on every device,
// in catalog order.
func Ceilings(modelGB float64) []CeilingRow {
	devs := catalogData().devices
	rows := make([]CeilingRow, 0, len(devs))
	for _, d := range devs {
		row := CeilingRow{
			Device:       d.ID,
			BandwidthGBs: d.MemoryBandwidthGBs,
			ModelGB:      modelGB,
			CeilingTokS:  DecodeCeiling(d.MemoryBandwidthGBs, modelGB),
		}
		if o, ok := d.ObservationFor(modelGB); ok && row.CeilingTokS > 0 {
			row.ObservedTokS = o.TokS
			row.ObservedOverCeiling = o.TokS / row.CeilingTokS
		}
		rows = append(rows, row)
	}
	return rows
}

// ObservationFor returns the first observation of a model within 10% of
// modelGB.
func (d Device) ObservationFor(modelGB float64) (Observation, bool) {
	if modelGB <= 0 {
		return Observation{}, false
	}
	for _, o := range d.Observed {
		if o.ModelGB > 0 && math.Abs(o.ModelGB-modelGB) <= observationMatchTolerance*modelGB {
			return o, true
		}
	}
	return Observation{}, false
}
