package vision

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/pipelines/litert"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// litert-convert decodes litert_convert.py's report strictly into
// pipelines/litert/report.Convert: the golden becomes the step's facts,
// and a report of another shape fails the step with the helper's name
// and log instead of recording zeros.
func TestLiteRTConvertReadsItsReport(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("..", "litert", "python", "reports", "litert_convert.json"))
	if err != nil {
		t.Fatal(err)
	}
	var line bytes.Buffer
	if err := json.Compact(&line, golden); err != nil {
		t.Fatal(err)
	}
	run := func(report []byte) (*steps.Context, error) {
		dir := t.TempDir()
		src := filepath.Join(dir, "source")
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, "config.json"), []byte(`{"architecture": "mobilenet_v3_small"}`), 0o644)
		sc := &steps.Context{StepID: "litert-convert:tflite-int8", Params: &LiteRTParams{PerChannel: true},
			Inputs: []steps.Input{{StepID: "source", Kind: shared.Fetch.Name(), Dir: src}},
			Out:    filepath.Join(dir, "out"), Log: &bytes.Buffer{}, Result: &steps.Result{}, LogPath: filepath.Join(dir, "step.log"),
			Tool: func(name string) ([]string, error) { return []string{name}, nil },
			Data: func(string) (string, error) { return "/data/calibration.npz", nil },
			Exec: func(_ context.Context, argv, _ []string) error {
				return os.WriteFile(filepath.Join(dir, "step.log"), append(append([]byte("progress\n"), report...), '\n'), 0o644)
			}}
		os.MkdirAll(sc.Out, 0o755)
		return sc, (litertConvert{}).Run(context.Background(), sc)
	}
	sc, err := run(line.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	r := sc.Result
	if !strings.Contains(r.Facts["format"], "int8 input (scale 0.018602, zero point -14)") || r.Metrics["calibration_images"] != 359 ||
		r.Metrics["int8_weight_operands"] != 54 || r.Metrics["ops"] != 100 || r.Versions["litert-torch"] != "0.10.0" {
		t.Errorf("facts %v metrics %v versions %v", r.Facts, r.Metrics, r.Versions)
	}
	sc, err = run([]byte(`{"bytes": 100, "weights": {"int8": 54}, "calibration_samples": 32, "input": {"dtype": "int8", "scale": 0.1, "zero_point": 0}}`))
	if err == nil || !strings.Contains(err.Error(), litert.ToolConvert+"'s report does not match") || !strings.Contains(err.Error(), sc.LogPath) {
		t.Fatalf("a report of another shape: %v", err)
	}
}
