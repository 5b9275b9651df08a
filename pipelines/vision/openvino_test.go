package vision

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/pipelines/vision/report"
)

// The int8 check refuses what NNCF left float unless it was asked to.
func TestCheckInt8(t *testing.T) {
	ok := report.OpenVINOQuantize{FakeQuantize: 78, Int8WeightConstants: 53, Convolutions: 54, Int8Convolutions: 53, CalibrationImages: 36,
		FloatConvolutions: []string{"/stem/Conv"}, KeptFloat: []string{"/stem/Conv"}}
	if err := checkInt8(ok, "log"); err != nil {
		t.Fatalf("the stem kept float on request: %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(*report.OpenVINOQuantize)
		want string
	}{
		"a float conv nobody asked for": {func(r *report.OpenVINOQuantize) { r.FloatConvolutions = append(r.FloatConvolutions, "/blocks/3/Conv") }, "/blocks/3/Conv"},
		"no FakeQuantize":               {func(r *report.OpenVINOQuantize) { r.FakeQuantize = 0 }, "nothing was quantized"},
		"no int8 weights":               {func(r *report.OpenVINOQuantize) { r.Int8WeightConstants, r.Int8Convolutions = 0, 0 }, "nothing was quantized"},
		"no calibration":                {func(r *report.OpenVINOQuantize) { r.CalibrationImages = 0 }, "no calibration images"},
	} {
		r := ok
		r.FloatConvolutions = append([]string(nil), ok.FloatConvolutions...)
		tc.edit(&r)
		if err := checkInt8(r, "log"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}
