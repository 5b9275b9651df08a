package edge

import (
	"path/filepath"
	"strings"
	"testing"
)

// A classifier's parameters are its learned weights: BatchNorm's running
// statistics and step counter (an I64 scalar) are state; another integer
// tensor means a quantized checkpoint, which the header cannot count.
func TestClassifierParams(t *testing.T) {
	dir := t.TempDir()
	writeSafetensorsHeader(t, filepath.Join(dir, "model.safetensors"), map[string]tensor{
		"features.0.0.weight":              {Dtype: "F32", Shape: []int64{16, 3, 3, 3}},
		"features.0.1.weight":              {Dtype: "F32", Shape: []int64{16}},
		"features.0.1.bias":                {Dtype: "F32", Shape: []int64{16}},
		"features.0.1.running_mean":        {Dtype: "F32", Shape: []int64{16}},
		"features.0.1.running_var":         {Dtype: "F32", Shape: []int64{16}},
		"features.0.1.num_batches_tracked": {Dtype: "I64", Shape: []int64{}},
		"classifier.weight":                {Dtype: "F32", Shape: []int64{10, 16}},
	})
	n, err := VisionModelParams(dir)
	if err != nil || n != 16*27+16+16+160 {
		t.Errorf("got %v, %v; want %d", n, err, 16*27+16+16+160)
	}
	writeSafetensorsHeader(t, filepath.Join(dir, "model.safetensors"), map[string]tensor{
		"classifier.weight": {Dtype: "I8", Shape: []int64{10, 16}},
	})
	if _, err := VisionModelParams(dir); err == nil || !strings.Contains(err.Error(), "quantized checkpoint") {
		t.Errorf("an int8 weight: %v", err)
	}
	if n, err := VisionModelParams("builtin:efficientnet-lite0"); err != nil || n != 4652008 {
		t.Errorf("built-in: %v, %v", n, err)
	}
	if _, err := VisionModelParams("hf://org/model"); err == nil || !strings.Contains(err.Error(), "--params") {
		t.Errorf("a remote source: %v", err)
	}
}
