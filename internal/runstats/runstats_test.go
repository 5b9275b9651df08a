package runstats

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestObserveSaveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records", "steps.json")
	s := Open(path)
	if d := s.Duration(Key("demo", "a")); d != 0 {
		t.Fatalf("empty store knows a duration: %v", d)
	}
	s.Observe(Key("demo", "a"), Step{Kind: "k", DurationNS: int64(3 * time.Second), PeakRSS: 1 << 30, ModelBytes: 1 << 28})
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	// Another run saved in between: both observations survive.
	other := Open(path)
	other.Observe(Key("demo", "b"), Step{Kind: "k", DurationNS: 5})
	if err := other.Save(); err != nil {
		t.Fatal(err)
	}
	s.Observe(Key("demo", "c"), Step{Kind: "k", DurationNS: 7})
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	r := Open(path)
	if st, ok := r.Last(Key("demo", "a")); !ok || st.Kind != "k" || st.PeakRSS != 1<<30 || st.ModelBytes != 1<<28 {
		t.Fatalf("Last after reopening: %+v %v", st, ok)
	}
	if _, ok := r.Last(Key("demo", "never")); ok {
		t.Fatal("Last found a step that never ran")
	}
	if r.Duration(Key("demo", "a")) != 3*time.Second || r.Duration(Key("demo", "b")) != 5 || r.Duration(Key("demo", "c")) != 7 {
		t.Fatalf("reopened store lost observations: %+v", r.all)
	}
}

func TestCorruptFileIsEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "steps.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d := Open(path).Duration("x/y"); d != 0 {
		t.Fatalf("corrupt records gave a duration %v", d)
	}
}

func TestPeakRSSNearestSizeScaled(t *testing.T) {
	s := Open("")
	s.Observe("r/small", Step{Kind: "convert", PeakRSS: 1000, ModelBytes: 100})
	s.Observe("r/big", Step{Kind: "convert", PeakRSS: 9000, ModelBytes: 1000})
	s.Observe("r/other", Step{Kind: "quantize", PeakRSS: 5, ModelBytes: 120})
	if got, ok := s.PeakRSS("convert", 120); !ok || got != 1200 {
		t.Fatalf("PeakRSS(convert, 120) = %d, %v; want 1200 scaled from the 100-byte run", got, ok)
	}
	if got, ok := s.PeakRSS("convert", 900); !ok || got != 8100 {
		t.Fatalf("PeakRSS(convert, 900) = %d, %v; want 8100", got, ok)
	}
	if _, ok := s.PeakRSS("convert", 400); ok {
		t.Fatal("a model 4x away from every record used one")
	}
	if _, ok := s.PeakRSS("export", 100); ok {
		t.Fatal("another kind's record was used")
	}
}

func TestOldRecordsAreForgotten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "steps.json")
	s := Open(path)
	s.Observe("old/a", Step{Kind: "k", DurationNS: 1, At: time.Now().Add(-2 * forgetAfter)})
	s.Observe("new/b", Step{Kind: "k", DurationNS: 2})
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	r := Open(path)
	if r.Duration("old/a") != 0 || r.Duration("new/b") != 2 {
		t.Fatalf("records after save: %+v", r.all)
	}
}
