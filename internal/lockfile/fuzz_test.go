package lockfile

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead: a lock is checked into a repository and may be edited by
// hand; no content may panic the reader or the comparison.
func FuzzRead(f *testing.F) {
	seeds, _ := filepath.Glob("../../recipes/*.lock")
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"lock_version": 1, "source": {"uri": "hf://a/b", "files": [{"path": "x", "size": -1}]}, "tools": {"": {}}}`))
	f.Add([]byte(`{"lock_version": 1, "tools": null, "data": {"": ""}, "toolchains": {"x": {}}}`))
	f.Add([]byte(`{`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "r.yaml.lock")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Read(p)
		if err != nil || l == nil {
			return
		}
		Diff(l, l)
		Diff(&Lock{}, l)
	})
}
