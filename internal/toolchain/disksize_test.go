package toolchain

import (
	"os"
	"path/filepath"
	"testing"
)

// Removing a folder frees only the files no path outside it links; two
// folders that share a file free it together.
func TestFreedBy(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{a, b} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(a, "shared"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(a, "shared"), filepath.Join(b, "shared")); err != nil {
		t.Skip("no hard links here:", err)
	}
	if err := os.WriteFile(filepath.Join(a, "own"), make([]byte, 10), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := FreedBy(a); got != 10 {
		t.Errorf("a alone frees %d bytes, want 10 (its shared file stays linked from b)", got)
	}
	if got := FreedBy(a, b); got != 1010 {
		t.Errorf("a and b free %d bytes, want 1010", got)
	}
}
