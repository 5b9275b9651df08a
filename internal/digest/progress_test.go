package digest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestMemoReportsHashProgressForBigFilesOnly(t *testing.T) {
	// The second File below can then only answer from the memo.
	trustAllWrites(t)
	dir := t.TempDir()
	big := filepath.Join(dir, "big.bin")
	small := filepath.Join(dir, "small.bin")
	if err := os.WriteFile(big, make([]byte, progressMinBytes+progressEvery+5), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(small, []byte("small"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := OpenMemo(filepath.Join(dir, "memo.json"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		calls = map[string][]int64{}
		total = map[string]int64{}
	)
	m.SetProgress(func(path string, done, tot int64) {
		mu.Lock()
		defer mu.Unlock()
		calls[path] = append(calls[path], done)
		total[path] = tot
	})
	for _, p := range []string{big, small} {
		if _, err := m.File(p); err != nil {
			t.Fatal(err)
		}
	}
	if len(calls[small]) != 0 {
		t.Errorf("a %d-byte file reported progress %v", 5, calls[small])
	}
	got := calls[big]
	if len(got) < 2 {
		t.Fatalf("big file reported %v, want several steps", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Errorf("progress went backwards: %v", got)
		}
	}
	if last, want := got[len(got)-1], int64(progressMinBytes+progressEvery+5); last != want || total[big] != want {
		t.Errorf("last report %d of %d, want %d of %d", last, total[big], want, want)
	}
	// A remembered digest reads nothing, so it reports nothing, even with
	// the callback still set.
	before := len(calls[big])
	if _, err := m.File(big); err != nil {
		t.Fatal(err)
	}
	if len(calls[big]) != before {
		t.Errorf("a remembered digest reported progress %v", calls[big][before:])
	}
	// Without a callback a rehash (the file changed) reports nothing.
	m.SetProgress(nil)
	if err := os.Chtimes(big, time.Now(), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.File(big); err != nil {
		t.Fatal(err)
	}
	if len(calls[big]) != before {
		t.Errorf("progress reported after SetProgress(nil)")
	}
}
