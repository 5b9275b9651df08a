package catalog_test

import (
	"math"
	"testing"

	. "github.com/edgepipe/edgepipe/internal/catalog"
	_ "github.com/edgepipe/edgepipe/pipelines"
)

func round1(x float64) float64 { return math.Round(x*10) / 10 }

func TestDecodeCeiling(t *testing.T) {
	for _, tc := range []struct {
		bandwidth, model, want float64
	}{
		{60, 4.7, 12.8},    // A18: observed 8
		{77, 4.7, 16.4},    // Snapdragon 8 Gen 3: observed 7
		{400, 4.7, 85.1},   // M3 Max
		{205, 4.7, 43.6},   // AGX Orin
		{50, 3.5, 14.3},    // the brief's "phone DRAM, about 14 tok/s"
		{90, 3.5, 25.7},    // "flagship phone, about 25"
		{3000, 3.5, 857.1}, // "3 TB/s HBM3, about 1.2 ms per token"
		{0, 4.7, 0},        // unknown bandwidth
		{60, 0, 0},         // no model size
		{60, -1, 0},        // nonsense size
	} {
		if got := round1(DecodeCeiling(tc.bandwidth, tc.model)); got != tc.want {
			t.Errorf("DecodeCeiling(%v, %v) = %v, want %v", tc.bandwidth, tc.model, got, tc.want)
		}
	}
}

func TestCeilings(t *testing.T) {
	rows := Ceilings(4.7)
	if len(rows) != len(DeviceIDs()) {
		t.Fatalf("%d rows for %d devices", len(rows), len(DeviceIDs()))
	}
	byDevice := map[string]CeilingRow{}
	for i, r := range rows {
		if r.Device != DeviceIDs()[i] {
			t.Errorf("row %d is %s, want catalog order", i, r.Device)
		}
		byDevice[r.Device] = r
	}
	for _, tc := range []struct {
		device                   string
		ceiling, observed, ratio float64
	}{
		{"apple-a18", 12.8, 8, 0.63},
		{"snapdragon-8-gen-3", 16.4, 7, 0.43},
		{"webgpu-m3-max", 85.1, 41, 0.48},
		{"apple-m3-max", 85.1, 55, 0.65},
		{"jetson-agx-orin", 43.6, 45, 1.03}, // not clamped
		{"jetson-thor", 58.1, 0, 0},         // no observation
	} {
		r := byDevice[tc.device]
		if round1(r.CeilingTokS) != tc.ceiling || r.ObservedTokS != tc.observed ||
			math.Round(r.ObservedOverCeiling*100)/100 != tc.ratio || r.ModelGB != 4.7 {
			t.Errorf("%s: %+v, want ceiling %v, observed %v, ratio %v", tc.device, r, tc.ceiling, tc.observed, tc.ratio)
		}
	}
}

func TestCeilingsMatchObservationsWithin10Percent(t *testing.T) {
	for _, tc := range []struct {
		model    float64
		observed float64 // on apple-a18
	}{
		{4.7, 8},
		{4.3, 8},  // 0.4 away, within 10% of 4.3
		{5.17, 8}, // 0.47 away, within 10% of 5.17
		{4.2, 0},  // 0.5 away, more than 10% of 4.2
		{2.0, 0},
		{0, 0},
	} {
		var got CeilingRow
		for _, r := range Ceilings(tc.model) {
			if r.Device == "apple-a18" {
				got = r
			}
		}
		if got.ObservedTokS != tc.observed {
			t.Errorf("Ceilings(%v) apple-a18 observed %v, want %v", tc.model, got.ObservedTokS, tc.observed)
		}
		if tc.observed == 0 && got.ObservedOverCeiling != 0 {
			t.Errorf("Ceilings(%v): ratio %v without an observation", tc.model, got.ObservedOverCeiling)
		}
	}
}

// Observations without a usable size (gpt-oss-20b, a mixture of experts)
// never stand in for a model size.
func TestObservationWithoutSizeNeverMatches(t *testing.T) {
	d, _ := Lookup("jetson-agx-orin")
	for _, o := range d.Observed {
		if o.ModelGB == 0 {
			for _, size := range []float64{0.001, 1, 12, 40} {
				if got, ok := d.ObservationFor(size); ok && got.Model == o.Model {
					t.Errorf("ObservationFor(%v) matched %q", size, o.Model)
				}
			}
			return
		}
	}
	t.Fatal("jetson-agx-orin lacks its gpt-oss-20b observation")
}
