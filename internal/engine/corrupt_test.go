package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/steps"
)

// damage edits a committed cache file in place, keeping its size and
// modification time (as a disk error or a stray edit would), so only
// hashing can tell.
func damage(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	nb := edit(bytes.Clone(b))
	if len(nb) != len(b) || bytes.Equal(nb, b) {
		t.Fatalf("damage %s: the edit must change bytes and keep the size", path)
	}
	if err := os.Chmod(path, 0o644); err != nil { // committed files are read-only
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, st.Mode()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
}

func flipFirst(b []byte) []byte { b[0] ^= 0x20; return b }

// notes are the run's log events for a step that say a cache entry was
// corrupt.
func (f *fixture) corruptNotes(step string) []string {
	var out []string
	for _, ev := range f.eventsOf(event.Log, step) {
		if strings.Contains(ev.Message, "is corrupt") {
			out = append(out, ev.Message)
		}
	}
	return out
}

// A cached output a step is about to read, damaged in place, is found
// before the step reads it: the run says so, evicts it, rebuilds it, and
// the step reads the bytes its need really makes.
func TestCorruptInputIsRebuilt(t *testing.T) {
	recipeWith := func(down string) string {
		return header + `  up: {uses: enginetest, with: {content: UP}}
  down: {uses: enginetest, needs: [up], with: {content: ` + down + `}}
`
	}
	f := newFixture(t, recipeWith("D1"))
	res, err := f.engine(Options{Jobs: 1}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	upKey := res.Outputs["up"].Key
	damage(t, filepath.Join(res.Outputs["up"].Dir, "out.bin"), flipFirst)

	// down changed, so it runs and reads up's cached output.
	f.rewrite(recipeWith("D2"))
	res, err = f.engine(Options{Jobs: 1}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	notes := f.corruptNotes("up")
	if len(notes) != 1 || !strings.Contains(notes[0], "the cached output of step up") || !strings.Contains(notes[0], "out.bin has sha256") {
		t.Errorf("notes on up: %q", notes)
	}
	if runs.runs("up") != 2 {
		t.Errorf("up ran %d times, want 2 (rebuilt once)", runs.runs("up"))
	}
	got, err := os.ReadFile(filepath.Join(res.Outputs["down"].Dir, "out.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "D2|UP" {
		t.Errorf("down made %q from its rebuilt input, want %q", got, "D2|UP")
	}
	ent, hit, err := f.cache.Lookup(upKey)
	if err != nil || !hit {
		t.Fatalf("up's rebuilt output is not cached: %v", err)
	}
	if err := f.cache.VerifyObject(ent); err != nil {
		t.Errorf("up's rebuilt output: %v", err)
	}

	// Verified once: another step reading it later runs nothing again.
	f.rewrite(recipeWith("D3"))
	if _, err := f.engine(Options{Jobs: 1}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if runs.runs("up") != 2 || len(f.corruptNotes("up")) != 0 {
		t.Errorf("an intact input was rebuilt: up ran %d times, notes %q", runs.runs("up"), f.corruptNotes("up"))
	}
}

// A check's result record edited to pass its gate (same size) is caught
// on the cache hit: the entry is evicted, the check runs again, and the
// gate judges what it really measures.
func TestEditedResultRecordIsNotTrusted(t *testing.T) {
	f := newFixture(t, header+`  check:t1: {with: {ppl: 30}}
`)
	res, err := f.engine(Options{Jobs: 1}).Run(context.Background())
	if !publish.IsGateFailure(err) {
		t.Fatalf("err = %v, want a failed gate", err)
	}
	damage(t, filepath.Join(res.Outputs["check:t1"].Dir, "result.json"), func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"ppl": 30`), []byte(`"ppl": 10`), 1)
	})
	res, err = f.engine(Options{Jobs: 1}).Run(context.Background())
	if !publish.IsGateFailure(err) {
		t.Fatalf("err = %v: the edited record passed the gate", err)
	}
	if g := res.Gates["t1"]; g == nil || g.Converted != 30 {
		t.Errorf("gate %+v, want the measured 30", g)
	}
	if notes := f.corruptNotes("check:t1"); len(notes) != 1 || !strings.Contains(notes[0], "result.json has sha256") {
		t.Errorf("notes on check:t1: %q", notes)
	}
	if runs.runs("check:t1") != 2 {
		t.Errorf("check:t1 ran %d times, want 2", runs.runs("check:t1"))
	}
}

// A model damaged in the cache after its checks passed is found when the
// publish copies it: the run says so, rebuilds the model and publishes
// the bytes its step really makes.
func TestPublishRebuildsACorruptModel(t *testing.T) {
	f := newFixture(t, header)
	res, err := f.engine(Options{Jobs: 1}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	published := filepath.Join(res.Published["t1"], "out.bin")
	good, err := os.ReadFile(published)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(res.Published["t1"]); err != nil {
		t.Fatal(err)
	}
	damage(t, filepath.Join(res.Outputs["convert"].Dir, "out.bin"), flipFirst)

	res, err = f.engine(Options{Jobs: 1}).Run(context.Background())
	if err != nil || res.Published["t1"] == "" {
		t.Fatalf("published %v: %v", res.Published, err)
	}
	notes := f.corruptNotes("publish:t1")
	if len(notes) != 1 || !strings.Contains(notes[0], "the cached output of step convert") || !strings.Contains(notes[0], "out.bin has sha256") {
		t.Errorf("notes on publish:t1: %q", notes)
	}
	if runs.runs("convert") != 2 {
		t.Errorf("convert ran %d times, want 2", runs.runs("convert"))
	}
	got, err := os.ReadFile(published)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, good) {
		t.Errorf("published %q, want the model's real bytes %q", got, good)
	}
}

// A rebuilt input whose bytes differ from the evicted ones (a tool that
// does not reproduce bit for bit) changes the key of the step reading it:
// the step is keyed by what it read, so the next run finds it cached.
func TestRebuiltInputThatDiffersRekeysTheStep(t *testing.T) {
	recipeWith := func(down string) string {
		return header + `  up: {uses: enginetest, with: {content: UP}}
  down: {uses: enginetest, needs: [up], with: {content: ` + down + `}}
`
	}
	f := newFixture(t, recipeWith("D1"))
	res, err := f.engine(Options{Jobs: 1}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	damage(t, filepath.Join(res.Outputs["up"].Dir, "out.bin"), flipFirst)
	setHook(t, "up", func(_ context.Context, sc *steps.Context) error {
		return os.WriteFile(filepath.Join(sc.Out, "stamp.txt"), []byte("made again"), 0o644)
	})
	f.rewrite(recipeWith("D2"))
	if _, err := f.engine(Options{Jobs: 1}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if runs.runs("up") != 2 || runs.runs("down") != 2 {
		t.Fatalf("up ran %d times, down %d; want 2 each", runs.runs("up"), runs.runs("down"))
	}
	if _, err := f.engine(Options{Jobs: 1}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if runs.runs("down") != 2 {
		t.Errorf("down ran again on an unchanged recipe (%d runs): it was cached under the key of the input it did not read", runs.runs("down"))
	}
}
