package qnn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRefusedNodes(t *testing.T) {
	log := filepath.Join(t.TempDir(), "step.log")
	text := "QNN 2.51.0\n[V:onnxruntime:] verbose noise\n" +
		"qnn_htp: the QNN HTP backend refused the graph (CPU fallback is disabled, so no node may run on the CPU): FAIL\n" +
		"qnn_htp: refused: Validation FAILED for 1 nodes in OrtNodeUnit (MatMul) :\n" +
		"qnn_htp: refused:   Operator type: MatMul Node name: /model/rotary_emb/MatMul_2 Node index: 7\n" +
		"qnn_htp: refused:   REASON : QNN.backendValidateOpConfig() failed, error 3110\n"
	if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := RefusedNodes(log)
	for _, want := range []string{"OrtNodeUnit (MatMul)", "Node name: /model/rotary_emb/MatMul_2", "error 3110"} {
		if !strings.Contains(got, want) {
			t.Errorf("RefusedNodes misses %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "verbose noise") || strings.Count(got, "\n") != 2 {
		t.Errorf("RefusedNodes keeps other lines:\n%s", got)
	}
	if RefusedNodes(filepath.Join(t.TempDir(), "missing.log")) != "" {
		t.Error("a missing log has no refused nodes")
	}
}
