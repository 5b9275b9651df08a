package recipe

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that no input panics the parser, that every failure
// is a list of diagnostics with a position, and that every recipe it
// accepts keeps the promises later stages rely on.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/recipes/*/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("edgepipe: 1\n---\n"))
	f.Add([]byte("\t\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse("f.yaml", data)
		if err != nil {
			var diags Diagnostics
			if !errors.As(err, &diags) || len(diags) == 0 {
				t.Fatalf("error is not a non-empty Diagnostics: %T %v", err, err)
			}
			for _, d := range diags {
				if d.Pos.File != "f.yaml" || d.Pos.Line < 1 || d.Pos.Col < 1 || d.Msg == "" {
					t.Fatalf("diagnostic without a position or message: %#v", d)
				}
			}
			if r != nil {
				Validate(r, fakeCatalog{}, fakeKinds)
			}
			return
		}
		if r == nil || r.Edgepipe != FormatVersion || len(r.Targets) == 0 {
			t.Fatalf("accepted an incomplete recipe: %+v", r)
		}
		names := []string{r.Name}
		for _, tg := range r.Targets {
			if tg.Device == "" || tg.Format == "" {
				t.Fatalf("accepted a target without device or format: %+v", tg)
			}
			if g := tg.Quality.Perplexity; g.WarnDelta > g.MaxDelta || g.Context <= 0 {
				t.Fatalf("accepted an impossible quality gate: %+v", g)
			}
			names = append(names, tg.Name)
		}
		for _, n := range names {
			if len(n) > MaxNameLen || !nameRE.MatchString(n) {
				t.Fatalf("accepted a name that is not a safe folder name: %q", n)
			}
		}
		// Plans holding with: values are saved as JSON.
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("accepted recipe does not encode as JSON: %v", err)
		}
		Validate(r, fakeCatalog{}, fakeKinds)
	})
}
