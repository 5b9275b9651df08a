package recipe

import "testing"

// The agreement gate: the recipe's applies to every target; a target's own
// replaces the accuracy gate it inherited by default, never one the recipe
// wrote; without any gate a vision recipe gates on accuracy.
func TestAgreementGate(t *testing.T) {
	const head = "edgepipe: 1\nname: t\ntask: image-classification\nmodel: {source: builtin:efficientnet-lite0}\n"
	for _, tc := range []struct {
		name, body          string
		accuracy, agreement []bool    // per target: gate set
		min                 []float64 // per target with agreement
		recipeAccuracyUnset bool
	}{
		{"default", "targets:\n  a: {device: x86-laptop, format: onnx-int8}\n",
			[]bool{true}, []bool{false}, nil, false},
		{"recipe agreement", "quality: {agreement: {}}\ntargets:\n  a: {device: x86-laptop, format: onnx-int8}\n",
			[]bool{false}, []bool{true}, []float64{DefaultMinAgreement}, true},
		{"target agreement", "targets:\n  a: {device: x86-laptop, format: onnx-int8, quality: {agreement: {min: 0.9}}}\n  b: {device: x86-laptop, format: onnx-fp32}\n",
			[]bool{false, true}, []bool{true, false}, []float64{0.9, 0}, false},
		{"both written", "quality: {accuracy: {max_drop: 0.02}}\ntargets:\n  a: {device: x86-laptop, format: onnx-int8, quality: {agreement: {min: 0.95}}}\n",
			[]bool{true}, []bool{true}, []float64{0.95}, false},
	} {
		r, err := Parse("r.yaml", []byte(head+tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (r.Quality.Accuracy == nil) != tc.recipeAccuracyUnset {
			t.Errorf("%s: recipe accuracy gate %+v", tc.name, r.Quality.Accuracy)
		}
		for i, tg := range r.Targets {
			if (tg.Quality.Accuracy != nil) != tc.accuracy[i] || (tg.Quality.Agreement != nil) != tc.agreement[i] {
				t.Errorf("%s: target %s: accuracy %+v agreement %+v", tc.name, tg.Name, tg.Quality.Accuracy, tg.Quality.Agreement)
			}
			if tc.agreement[i] && tg.Quality.Agreement.Min != tc.min[i] {
				t.Errorf("%s: target %s: min %g, want %g", tc.name, tg.Name, tg.Quality.Agreement.Min, tc.min[i])
			}
		}
	}
}
