package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// corruptCache damages one file of a step's cached output the way disks,
// editors and careless scripts do, keeping its size and mtime so that the
// cache's stat checks alone cannot tell:
//
//	corrupt-cache STEP FILE flip     flip one byte in the middle
//	corrupt-cache STEP FILE ppl      lower the perplexity in a result record
//	corrupt-cache STEP FILE symlink  replace it with a link to a same-size file
//	corrupt-cache STEP - record      edit the entry's record (its duration)
func corruptCache(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: corrupt-cache STEP FILE flip|ppl|symlink|record")
	}
	step, file, how := args[0], args[1], args[2]
	root := ts.Getenv("EDGEPIPE_CACHE")
	key := entryKey(ts, root, step)
	if how == "record" {
		rec := filepath.Join(root, "entries", key+".json")
		b, err := os.ReadFile(rec)
		ts.Check(err)
		edited := regexp.MustCompile(`"duration_ns":\s*\d`).ReplaceAllFunc(b, func(m []byte) []byte {
			m = append([]byte(nil), m...) // m aliases b
			m[len(m)-1] = '0' + (m[len(m)-1]-'0'+1)%10
			return m
		})
		if string(edited) == string(b) {
			ts.Fatalf("record of %s has no duration to edit", step)
		}
		ts.Check(os.WriteFile(rec, edited, 0o644))
		return
	}
	path := filepath.Join(root, "objects", key, filepath.FromSlash(file))
	fi, err := os.Stat(path)
	ts.Check(err)
	b, err := os.ReadFile(path)
	ts.Check(err)
	ts.Check(os.Chmod(path, 0o644))
	switch how {
	case "flip":
		if len(b) == 0 {
			ts.Fatalf("%s is empty", path)
		}
		b[len(b)/2] ^= 0x01
		ts.Check(os.WriteFile(path, b, 0o444))
	case "ppl":
		// Every digit of the measured perplexity becomes 1: same length,
		// and low enough to pass any gate.
		re := regexp.MustCompile(`("ppl":\s*)([0-9.]+)`)
		if !re.Match(b) {
			ts.Fatalf("%s has no ppl", path)
		}
		b = re.ReplaceAllFunc(b, func(m []byte) []byte {
			sub := re.FindSubmatch(m)
			return append(sub[1], regexp.MustCompile(`[0-9]`).ReplaceAll(sub[2], []byte("1"))...)
		})
		ts.Check(os.WriteFile(path, b, 0o444))
	case "symlink":
		other := ts.MkAbs("swapped-" + filepath.Base(file))
		ts.Check(os.WriteFile(other, []byte(strings.Repeat("x", len(b))), 0o644))
		ts.Check(os.Remove(path))
		ts.Check(os.Symlink(other, path))
		return
	default:
		ts.Fatalf("corrupt-cache: unknown damage %q", how)
	}
	ts.Check(os.Chtimes(path, time.Time{}, fi.ModTime()))
}

// entryKey is the key of the newest cache entry of a step.
func entryKey(ts *testscript.TestScript, root, step string) string {
	names, err := filepath.Glob(filepath.Join(root, "entries", "*.json"))
	ts.Check(err)
	var key string
	var newest time.Time
	for _, n := range names {
		b, err := os.ReadFile(n)
		ts.Check(err)
		var e struct {
			Key     string    `json:"key"`
			StepID  string    `json:"step_id"`
			Created time.Time `json:"created"`
		}
		ts.Check(json.Unmarshal(b, &e))
		if e.StepID == step && !e.Created.Before(newest) {
			key, newest = e.Key, e.Created
		}
	}
	if key == "" {
		ts.Fatalf("no cache entry for step %s", step)
	}
	return key
}
