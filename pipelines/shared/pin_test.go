package shared

import (
	"strings"
	"testing"
)

func TestPinRevision(t *testing.T) {
	c := strings.Repeat("ab", 20)
	for _, tc := range []struct {
		src, want  string
		ok, moving bool
	}{
		{"hf://org/name", "hf://org/name@" + c, true, true},
		{"hf://org/name@main", "hf://org/name@" + c, true, true},
		{"hf://datasets/org/name@v1", "hf://datasets/org/name@" + c, true, true},
		{"hf://org/name@" + c, "hf://org/name@" + c, true, false},
		{"git::https://example.com/m.git?ref=main", "git::https://example.com/m.git?ref=" + c, true, true},
		{"git::https://example.com/m.git", "git::https://example.com/m.git?ref=" + c, true, true},
		{"git::https://example.com/m.git?ref=" + c, "git::https://example.com/m.git?ref=" + c, true, false},
		{"builtin:smollm2-135m", "", false, false},
		{"https://example.com/m.tar.gz", "", false, false},
		{"./model", "", false, false},
	} {
		got, ok := PinRevision(tc.src, c)
		if got != tc.want || ok != tc.ok {
			t.Errorf("PinRevision(%q) = %q, %v; want %q, %v", tc.src, got, ok, tc.want, tc.ok)
		}
		if m := MovingRevision(tc.src); m != tc.moving {
			t.Errorf("MovingRevision(%q) = %v, want %v", tc.src, m, tc.moving)
		}
	}
	// Only a full commit pins: a branch name would not.
	if _, ok := PinRevision("hf://org/name", "main"); ok {
		t.Error("pinned to a branch name")
	}
}

// A source that does not parse pins nothing and is not called moving.
func TestPinRevisionOfBadSources(t *testing.T) {
	c := strings.Repeat("0f", 20)
	for _, src := range []string{"hf://", "hf://org", "git::%zz"} {
		if got, ok := PinRevision(src, c); ok || got != "" {
			t.Errorf("PinRevision(%q) = %q, %v", src, got, ok)
		}
		if MovingRevision(src) {
			t.Errorf("MovingRevision(%q) = true", src)
		}
	}
	// Only a full, lower-case sha is a commit.
	for _, rev := range []string{strings.ToUpper(c), c[:39], c + "0", "v1.0"} {
		if _, ok := PinRevision("hf://org/name", rev); ok {
			t.Errorf("pinned to %q", rev)
		}
	}
}
