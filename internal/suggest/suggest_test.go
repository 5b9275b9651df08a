package suggest

import "testing"

func TestClosest(t *testing.T) {
	cands := []string{"targets", "model", "quality", "steps", "apple-a18", "apple-m4"}
	for _, tc := range []struct{ in, want string }{
		{"target", "targets"},
		{"modle", "model"},
		{"qualty", "quality"},
		{"apple-a17", "apple-a18"},
		{"zzzzzzzz", ""},
	} {
		if got := Closest(tc.in, cands); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
