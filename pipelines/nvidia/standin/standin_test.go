package standin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/nvidia/report"
	"github.com/edgepipe/edgepipe/steps/steptest"
)

// The stand-in writes the report the kind decodes strictly: the same type
// the golden and the Python writer are checked against.
func TestStandInReportDecodesStrictly(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	os.MkdirAll(ckpt, 0o755)
	os.WriteFile(filepath.Join(ckpt, "config.json"), []byte(`{"hidden_size": 64, "num_hidden_layers": 2}`), 0o644)
	os.WriteFile(filepath.Join(ckpt, "model.safetensors"), []byte("weights of a small model, any bytes will do for the stand-ins"), 0o644)
	calib := filepath.Join(dir, "calib.txt")
	os.WriteFile(calib, []byte("some calibration text"), 0o644)
	for _, tc := range []struct{ qformat, kv, export, algo, kvAlgo string }{
		{"nvfp4", "fp8", "hf", "NVFP4", "FP8"},
		{"int4_awq", "none", "trtllm", "W4A16_AWQ", ""},
	} {
		var out, errs bytes.Buffer
		if err := standin.Tools["modelopt_quantize.py"]([]string{"--model", ckpt, "--qformat", tc.qformat, "--kv-cache", tc.kv,
			"--export", tc.export, "--calib", calib, "--out", filepath.Join(dir, tc.qformat)}, &out, &errs); err != nil {
			t.Fatalf("%s: %v\n%s", tc.qformat, err, errs.String())
		}
		var m report.ModelOpt
		steptest.CheckReport(t, "modelopt_quantize.py", bytes.TrimSpace(out.Bytes()), &m)
		if m.QuantAlgo != tc.algo || m.KVCacheQuantAlgo != tc.kvAlgo || m.Export != tc.export || m.GroupSize == nil {
			t.Errorf("%s report %+v", tc.qformat, m)
		}
	}
}
