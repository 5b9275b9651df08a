// Package proctree reads what /proc says about a process and its
// descendants: I/O counters, and the summed resident set of a process tree
// (sampled), for benchmarks that measure whole runs.
package proctree

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ReadIO reads /proc/PID/io (rchar, read_bytes, ...). The kernel folds a
// reaped child's counters into its parent's, so read before reaping.
func ReadIO(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return nil, fmt.Errorf("read I/O counters of pid %d: %w", pid, err)
	}
	return ParseIO(b)
}

// ParseIO parses /proc/<pid>/io: "name: value" lines.
func ParseIO(b []byte) (map[string]int64, error) {
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse /proc io line %q: %w", line, err)
		}
		out[strings.TrimSpace(name)] = n
	}
	if _, ok := out["rchar"]; !ok {
		return nil, fmt.Errorf("no rchar in /proc io counters")
	}
	return out, nil
}

// SampleRSS polls the summed RSS of root and its descendants every
// 50 ms until the returned function is called, which returns the peak.
func SampleRSS(root int) (stop func() int64) {
	done := make(chan struct{})
	var mu sync.Mutex
	var peak int64
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if s := TreeRSS(root); s > 0 {
				mu.Lock()
				peak = max(peak, s)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// TreeRSS sums the resident set of root and every descendant, from one
// scan of /proc. Processes that vanish mid-scan are skipped.
func TreeRSS(root int) int64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	parent := map[int]int{}
	rss := map[int]int64{}
	page := int64(os.Getpagesize())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		ppid, pages, ok := ParseStat(b)
		if !ok {
			continue
		}
		parent[pid] = ppid
		rss[pid] = pages * page
	}
	var sum int64
	for pid, r := range rss {
		for p, hops := pid, 0; p > 0 && hops < 64; p, hops = parent[p], hops+1 {
			if p == root {
				sum += r
				break
			}
		}
	}
	return sum
}

// ParseStat returns ppid (field 4) and rss in pages (field 24) of a
// /proc/<pid>/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func ParseStat(b []byte) (ppid int, rssPages int64, ok bool) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 22 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	rssPages, err2 := strconv.ParseInt(f[21], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return ppid, rssPages, true
}
