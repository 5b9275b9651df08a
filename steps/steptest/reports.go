// Package steptest holds test helpers for step kinds: the check that a
// family's helper reports, its Go report types and its goldens agree.
package steptest

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/steps"
)

// CheckReportGoldens checks a family's report goldens, dir/STEM.json for
// the helper STEM.py: each decodes strictly into its helper's report type
// (types maps the helper's file name to a new value of it), and every
// helper in types has one. The same goldens are what the Python test of
// the helpers' writers (pipelines/pylib/tests/test_reports.py) compares
// each helper's report() with, so the three cannot drift apart.
func CheckReportGoldens(t *testing.T, dir string, types map[string]func() any) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		helper := strings.TrimSuffix(filepath.Base(f), ".json") + ".py"
		newType, ok := types[helper]
		if !ok {
			t.Errorf("%s: no report type for %s", f, helper)
			continue
		}
		seen[helper] = true
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := steps.DecodeReport(helper, b, newType()); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	var missing []string
	for helper := range types {
		if !seen[helper] {
			missing = append(missing, helper)
		}
	}
	sort.Strings(missing)
	for _, h := range missing {
		t.Errorf("%s has a report type but no golden %s", h, filepath.Join(dir, strings.TrimSuffix(h, ".py")+".json"))
	}
}

// CheckReport decodes one report line (a stand-in's output, say) strictly
// into v, failing the test with the helper's name when it does not fit.
func CheckReport(t *testing.T, helper string, line []byte, v any) {
	t.Helper()
	if err := steps.DecodeReport(helper, line, v); err != nil {
		t.Fatal(err)
	}
}
