package manifest

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead: a published folder's manifest.json may come from anyone (a
// pulled artifact); reading and verifying it must not panic.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"manifest_version": 1, "files": [{"path": "m.gguf", "sha256": "00", "size": 3}]}`))
	f.Add([]byte(`{"manifest_version": 1, "files": [{"path": "../../etc/passwd", "size": -1}]}`))
	f.Add([]byte(`{"manifest_version": 99}`))
	f.Add([]byte(`{"manifest_version": 1, "steps": [{}], "metrics": {"size_bytes": -5}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(dir); err != nil {
			return
		}
		Verify(dir)
	})
}
