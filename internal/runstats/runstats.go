// Package runstats remembers what steps cost when they last ran (how long,
// and the peak resident memory of their processes) so the next run can
// schedule by it: the longest remaining work first, and memory weights
// sized from what the same kind of step really used on a model of about
// the same size. The records only steer scheduling; a lost or corrupt file
// costs a guess, never a wrong output, so it is read leniently and written
// without locking (two runs saving at once keep one's observations).
package runstats

import (
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/boundedfile"
)

const version = 1

// forgetAfter is how long a step's record is kept without a new run.
const forgetAfter = 90 * 24 * time.Hour

// maxFileBytes caps the records file read back; past it, it starts over.
const maxFileBytes = 16 << 20

// Step is one step's last run.
type Step struct {
	Kind       string `json:"kind"`
	DurationNS int64  `json:"duration_ns"`
	// PeakRSS is the largest resident set, in bytes, of any process the
	// step ran (wait4's ru_maxrss); 0 when it ran none.
	PeakRSS int64 `json:"peak_rss"`
	// ModelBytes is the size of the model the step worked on.
	ModelBytes int64     `json:"model_bytes"`
	At         time.Time `json:"at"`
}

type file struct {
	Version int `json:"version"`
	// Steps by recipe name and step id ("demo/gguf-quantize:q4_k_m").
	Steps map[string]Step `json:"steps"`
}

// Store is the records of one cache. Safe for concurrent use.
type Store struct {
	path string
	mu   sync.Mutex
	all  map[string]Step
	ours map[string]Step // observed by this process, merged on Save
}

// Open reads the records at path; a missing or unreadable file gives an
// empty store. An empty path gives a store that is never saved.
func Open(path string) *Store {
	s := &Store{path: path, all: map[string]Step{}, ours: map[string]Step{}}
	if path != "" {
		s.all = load(path)
	}
	return s
}

func load(path string) map[string]Step {
	b, err := boundedfile.Read(path, maxFileBytes)
	if err != nil {
		return map[string]Step{}
	}
	var f file
	if json.Unmarshal(b, &f) != nil || f.Version != version || f.Steps == nil {
		return map[string]Step{}
	}
	return f.Steps
}

// Key names a step of a recipe.
func Key(recipe, stepID string) string { return recipe + "/" + stepID }

// Duration is how long the step took last time; 0 when unknown.
func (s *Store) Duration(key string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.all[key].DurationNS)
}

// Last is the record of the step's last successful run, if there is one:
// for reports that compare a prediction with what the step really used.
func (s *Store) Last(key string) (Step, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.all[key]
	return st, ok
}

// Observe records a finished run of a step.
func (s *Store) Observe(key string, st Step) {
	if st.At.IsZero() {
		st.At = time.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all[key] = st
	s.ours[key] = st
}

// PeakRSS returns the peak RSS measured the last time a step of this kind
// ran on a model within a factor of two of modelBytes (the closest such
// size), scaled linearly to modelBytes, and whether there was one.
func (s *Store) PeakRSS(kind string, modelBytes int64) (int64, bool) {
	if modelBytes <= 0 {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var best Step
	bestGap := 2.0
	for _, st := range s.all {
		if st.Kind != kind || st.PeakRSS <= 0 || st.ModelBytes <= 0 {
			continue
		}
		r := float64(modelBytes) / float64(st.ModelBytes)
		gap := max(r, 1/r)
		if gap < bestGap || (gap == bestGap && st.At.After(best.At)) {
			best, bestGap = st, gap
		}
	}
	if best.PeakRSS == 0 {
		return 0, false
	}
	return int64(float64(best.PeakRSS) * float64(modelBytes) / float64(best.ModelBytes)), true
}

// Save writes the records: the file as it is now (another run may have
// saved since we read it) with this process's observations on top.
func (s *Store) Save() error {
	if s.path == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ours) == 0 {
		return nil
	}
	merged := load(s.path)
	maps.Copy(merged, s.ours)
	// Steps of recipes not run for a long time are forgotten, so the file
	// every run reads stays small.
	for k, st := range merged {
		if time.Since(st.At) > forgetAfter {
			delete(merged, k)
		}
	}
	b, err := json.MarshalIndent(file{Version: version, Steps: merged}, "", " ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteMkdir(s.path, b, 0o644); err != nil {
		return fmt.Errorf("save step records %s: %w", s.path, err)
	}
	s.all = merged
	return nil
}
