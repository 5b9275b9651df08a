package edge

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// Speed is a model's decode speed on a device as far as plan time can tell:
// the bandwidth ceiling (every weight is read once per token), and, where the
// catalog has a field observation on the device, the share of its ceiling
// that observation reached applied to this model.
type Speed struct {
	Device       string  `json:"device"`
	BandwidthGBs float64 `json:"bandwidth_gb_s"`
	ModelGB      float64 `json:"model_gb"`
	CeilingTokS  float64 `json:"ceiling_tok_s"`
	// ObservedShare is observed / ceiling of the device's first observation
	// with a model size; 0 when it has none.
	ObservedShare float64 `json:"observed_share,omitempty"`
	// ExpectedTokS is CeilingTokS x ObservedShare; 0 without an observation.
	ExpectedTokS float64 `json:"expected_tok_s,omitempty"`
	Observation  string  `json:"observation,omitempty"`
}

// DecodeSpeed works out the ceiling and, where possible, the expected speed
// of a modelGB model on d.
func DecodeSpeed(d catalog.Device, modelGB float64) Speed {
	s := Speed{Device: d.ID, BandwidthGBs: d.MemoryBandwidthGBs, ModelGB: modelGB,
		CeilingTokS: catalog.DecodeCeiling(d.MemoryBandwidthGBs, modelGB)}
	if o, share, ok := observedShare(d); ok && s.CeilingTokS > 0 {
		s.Observation = fmt.Sprintf("%g tok/s for %s (%g GB, %s) is %.0f%% of its ceiling", o.TokS, o.Model, o.ModelGB, o.Source, share*100)
		if share > 1 {
			// A little over the ceiling (AGX Orin's 45 against 43.6:
			// embeddings are looked up, not streamed) must not lift a
			// prediction over the physical bound.
			share = 1
			s.Observation += ", so the prediction is the ceiling"
		}
		s.ObservedShare = share
		s.ExpectedTokS = s.CeilingTokS * share
	}
	return s
}

// observedShare is how close the device's first observation with a usable
// model size came to its bandwidth ceiling: runtimes reach a fairly stable
// share of the ceiling on one device, so it scales to other model sizes.
func observedShare(d catalog.Device) (catalog.Observation, float64, bool) {
	for _, o := range d.Observed {
		if c := catalog.DecodeCeiling(d.MemoryBandwidthGBs, o.ModelGB); c > 0 {
			return o, o.TokS / c, true
		}
	}
	return catalog.Observation{}, 0, false
}

// speedFixes are the changes that bring the decode speed of a params model
// in f on d to minTokS, given that the device delivers share of its
// bandwidth ceiling (1 for the ceiling itself): a smaller model, or a
// format with fewer bits a weight that the device runs.
func speedFixes(d catalog.Device, params int64, f catalog.Format, minTokS, share float64) []Fix {
	if minTokS <= 0 || share <= 0 || d.MemoryBandwidthGBs <= 0 {
		return nil
	}
	maxGB := d.MemoryBandwidthGBs * share / minTokS
	var fixes []Fix
	if f.BitsPerWeight > 0 {
		p := int64(maxGB * 1e9 * 8 / f.BitsPerWeight)
		fixes = append(fixes, Fix{
			Change: "a smaller model",
			Effect: fmt.Sprintf("at most %s parameters in %s, %s of weights", paramsAtMost(p), f.Name, gb(maxGB)),
		})
	}
	if params <= 0 {
		return fixes
	}
	need := maxGB * 1e9 * 8 / float64(params)
	if alt, ok := fewerBits(d, f, need); ok {
		w := catalog.EstimateWeightsGB(params, alt)
		effect := fmt.Sprintf("%g bits a weight, %s, ceiling %s", alt.BitsPerWeight, gb(w),
			tokS(catalog.DecodeCeiling(d.MemoryBandwidthGBs, w)))
		if share < 1 {
			effect += fmt.Sprintf(", expected about %s", tokS(catalog.DecodeCeiling(d.MemoryBandwidthGBs, w)*share))
		}
		if rt := d.RuntimeFor(alt.Name); rt != d.RuntimeFor(f.Name) {
			effect += ", runs on " + rt
		}
		if alt.NeedsImatrix {
			effect += "; needs with: {imatrix: true}"
		}
		fixes = append(fixes, Fix{Change: "fewer bits: format: " + alt.Name, Effect: effect})
	} else {
		fixes = append(fixes, Fix{Change: "fewer bits",
			Effect: fmt.Sprintf("would need at most %.2f bits a weight, fewer than any format %s runs", need, d.ID)})
	}
	return fixes
}

// fewerBits picks, among the formats d runs with fewer bits a weight than f
// and at most maxBits, the one with the most bits (the least quality lost),
// preferring f's own family on a tie.
func fewerBits(d catalog.Device, f catalog.Format, maxBits float64) (catalog.Format, bool) {
	var best catalog.Format
	found := false
	for _, alt := range catalog.Formats() {
		if alt.Name == f.Name || alt.BitsPerWeight > maxBits || alt.BitsPerWeight >= f.BitsPerWeight || !d.Runs(alt.Name) {
			continue
		}
		better := !found || alt.BitsPerWeight > best.BitsPerWeight ||
			(alt.BitsPerWeight == best.BitsPerWeight && alt.Family == f.Family && best.Family != f.Family)
		if better {
			best, found = alt, true
		}
	}
	return best, found
}
