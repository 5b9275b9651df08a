package standin

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/internal/gguf/gguftest"
	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps/steptest"
)

// The stand-ins write the reports the kinds decode strictly: the same
// types the goldens and the Python writers are checked against.
func TestStandInReportsDecodeStrictly(t *testing.T) {
	dir := t.TempDir()
	gguf := filepath.Join(dir, "m.gguf")
	if err := gguftest.Tiny().File().Write(gguf); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := standin.Tools["gguf_to_hf.py"]([]string{"--gguf", gguf, "--out", filepath.Join(dir, "ckpt")}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var g report.GGUFToHF
	steptest.CheckReport(t, "gguf_to_hf.py", bytes.TrimSpace(out.Bytes()), &g)
	if g.FileType != "Q8_0" || g.TensorTypes["Q8_0"] != 16 || g.Parameters != gguftest.Tiny().Params() || len(g.Files) != 3 {
		t.Fatalf("report %+v", g)
	}

	text := filepath.Join(dir, "eval.txt")
	os.WriteFile(text, bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 200), 0o644)
	out.Reset()
	if err := standin.Tools["hf_perplexity.py"]([]string{"--model", filepath.Join(dir, "ckpt"), "--text", text, "--ctx", "64"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var p report.Perplexity
	steptest.CheckReport(t, "hf_perplexity.py", bytes.TrimSpace(out.Bytes()), &p)
	if p.PPL <= 0 || p.Ctx != 64 {
		t.Fatalf("report %+v", p)
	}
}
