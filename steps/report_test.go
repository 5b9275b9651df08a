package steps

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type innerReport struct {
	Bits int `json:"bits"`
}

type testReport struct {
	Model  string            `json:"model"`
	PPL    *float64          `json:"ppl"`
	Inner  *innerReport      `json:"inner"`
	Layers []innerReport     `json:"layers"`
	Extra  map[string]string `json:"extra"`
}

func TestDecodeReportIsStrictBothWays(t *testing.T) {
	ok := `{"model": "m.onnx", "ppl": null, "inner": {"bits": 4}, "layers": [{"bits": 8}], "extra": {}}`
	var r testReport
	if err := DecodeReport("x.py", []byte(ok), &r); err != nil {
		t.Fatal(err)
	}
	if r.Model != "m.onnx" || r.PPL != nil || r.Inner.Bits != 4 || r.Layers[0].Bits != 8 {
		t.Fatalf("decoded %+v", r)
	}
	for _, tc := range []struct{ line, want string }{
		{`{"model": "m", "ppl": 1, "inner": null, "layers": [], "extra": {}, "surprise": 1}`, `unknown field "surprise"`},
		{`{"ppl": 1, "inner": null, "layers": [], "extra": {}}`, "missing field(s) model"},
		{`{"model": "m", "ppl": 1, "inner": {}, "layers": [], "extra": {}}`, "inner.bits"},
		{`{"model": 3, "ppl": 1, "inner": null, "layers": [], "extra": {}}`, "cannot unmarshal number"},
		{`[1]`, "cannot unmarshal array"},
	} {
		err := DecodeReport("onnx_export.py", []byte(tc.line), &testReport{})
		var re *ReportError
		if !errors.As(err, &re) || re.Helper != "onnx_export.py" || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "onnx_export.py") {
			t.Errorf("%s: err = %v, want a ReportError naming the helper and %q", tc.line, err, tc.want)
		}
	}
}

func TestReadReportTakesTheLastJSONLine(t *testing.T) {
	log := filepath.Join(t.TempDir(), "step.log")
	body := "loading {not json}\n{\"model\": \"old\"}\nprogress 50%\n" +
		`{"model": "new", "ppl": 2.5, "inner": null, "layers": null, "extra": null}` + "\ntrailing words\n"
	if err := os.WriteFile(log, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var r testReport
	if err := ReadReport("h.py", log, &r); err != nil {
		t.Fatal(err)
	}
	if r.Model != "new" || *r.PPL != 2.5 {
		t.Fatalf("read %+v", r)
	}
	empty := filepath.Join(t.TempDir(), "empty.log")
	os.WriteFile(empty, []byte("no report\n"), 0o644)
	if err := ReadReport("h.py", empty, &r); err == nil || !strings.Contains(err.Error(), "no JSON result line") {
		t.Fatalf("a log without a report: %v", err)
	}
}

func TestReportFields(t *testing.T) {
	if got := strings.Join(ReportFields(&testReport{}), " "); got != "extra inner layers model ppl" {
		t.Fatalf("ReportFields = %s", got)
	}
}
