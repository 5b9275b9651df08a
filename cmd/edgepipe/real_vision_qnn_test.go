package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// checkQNNManifest verifies a published qnn-int8 target (hexagon-int8 in
// both vision recipes): the EPContext model and its context binary compiled
// by QNN's HTP backend for the Snapdragon 8 Gen 3, scored on the HTP
// simulator over the whole evaluation set against the PyTorch reference,
// no stand-in step, and a binary smaller than the fp32 model.
func checkQNNManifest(t *testing.T, run func(args ...string) []byte, dir string, images int, fp32 *manifest.Manifest) *manifest.Manifest {
	t.Helper()
	run("verify", dir)
	m, err := manifest.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	backend, refBackend, scored := "", "", 0
	if a := m.Metrics.Accuracy; a != nil {
		backend, refBackend, scored = a.Backend, a.ReferenceBackend, a.Images
	} else if g := m.Metrics.Agreement; g != nil {
		backend, refBackend, scored = g.Backend, g.ReferenceBackend, g.Images
	}
	if scored != images || !strings.HasPrefix(backend, "QNN 2.51.0 HTP backend on the HTP simulator") ||
		!strings.Contains(backend, "CPU fallback disabled") || !strings.HasPrefix(refBackend, "torch 2.11.0") {
		t.Fatalf("%s: scored %d images on %q against %q: want all %d on QNN's HTP simulator against PyTorch", dir, scored, backend, refBackend, images)
	}
	kinds := map[string]string{}
	for _, s := range m.Steps {
		if s.StandIn {
			t.Errorf("%s: step %s ran a stand-in in the real tier", dir, s.ID)
		}
		kinds[s.Kind] += s.Note
	}
	if n := kinds["vision-qnn-quantize"]; !strings.Contains(n, "uint8 activations, int8 symmetric weights (Conv and Gemm per output channel") ||
		!strings.Contains(n, "static input [1 3 ") {
		t.Errorf("%s: quantize note %q: want per-channel int8 weights, uint8 activations, batch 1", dir, n)
	}
	if n := kinds["vision-qnn-compile"]; !strings.Contains(n, "QNN 2.51.0 HTP backend") || !strings.Contains(n, "soc_model 57, htp_arch v75") {
		t.Errorf("%s: compile note %q: want QNN 2.51.0's HTP backend for soc_model 57, v75", dir, n)
	}
	for _, f := range []string{"model_ctx.onnx", "model_ctx_qnn.bin", "config.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if *m.Metrics.SizeBytes > *fp32.Metrics.SizeBytes/2 || m.Metrics.DecodeCeilingTokS != nil {
		t.Errorf("%s: %d bytes (fp32 ONNX %d): want an INT8 context binary under half the fp32 model, and no LLM ceiling",
			dir, *m.Metrics.SizeBytes, *fp32.Metrics.SizeBytes)
	}
	return m
}
