// Package lockfile is a recipe's lock: what its inputs resolved to (the
// source's revision and every source file's digest, the data files, the
// tools and the toolchains they come from, the edgepipe version), written
// beside the recipe as RECIPE.lock so that a later run, on this machine or
// in CI, can tell whether anything would resolve differently.
//
// A lock holds only what names content: digests, revisions, versions. It
// never holds times, absolute paths of the cache or the tools, anything
// read from the environment (tokens) or credentials written into a source
// URL (redacted), so the same inputs give the same bytes on every machine
// of the same platform.
package lockfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/jsonfile"
)

// Version is the lock_version this package writes and reads.
const Version = 1

// Suffix is appended to the recipe's file name: recipes/demo.yaml.lock.
const Suffix = ".lock"

// PathFor is the lock file of a recipe file.
func PathFor(recipe string) string { return recipe + Suffix }

// Lock is the content of RECIPE.lock.
type Lock struct {
	LockVersion     int    `json:"lock_version"`
	EdgepipeVersion string `json:"edgepipe_version"`
	// Platform is GOOS/GOARCH: the native llama.cpp build's digest depends
	// on it, so a lock is valid for one platform.
	Platform string `json:"platform"`
	Source   Source `json:"source"`
	// Data maps each data reference as the recipe writes it (builtin:eval,
	// eval.txt) to the sha256 of the file it resolved to.
	Data map[string]string `json:"data,omitempty"`
	// Toolchains are the pinned toolchains the tools come from, by name.
	Toolchains map[string]Toolchain `json:"toolchains,omitempty"`
	// Tools are every tool the recipe's steps run, by name.
	Tools map[string]Tool `json:"tools,omitempty"`
}

// Source is the model source as resolved.
type Source struct {
	// URI is the recipe's model.source as written, credentials redacted.
	URI string `json:"uri"`
	// Revision is the commit a branch or tag resolved to (Hugging Face,
	// git); a run with this lock fetches that commit.
	Revision string `json:"resolved_revision,omitempty"`
	Files    []File `json:"files"`
}

// File is one source file. Path is relative, slash-separated.
type File struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Toolchain is one installed toolchain's identity.
type Toolchain struct {
	// LockDigest is "sha256:..." of the toolchain's lock or build pin.
	LockDigest string `json:"lock_digest"`
	// Versions are the versions that matter most, as `edgepipe doctor`
	// prints them (llama.cpp's commit, torch, transformers, ...).
	Versions string `json:"versions,omitempty"`
}

// Tool is one tool a step runs.
type Tool struct {
	// From is where the tool was found: "toolchain NAME", "tool-path" or
	// "recipe" (the recipe's toolchains section).
	From string `json:"from"`
	// Identity is the digest that enters cache keys: the toolchain's lock
	// (with the interpreter's and the helper script's digests for Python
	// helpers), or the executable's own sha256.
	Identity string `json:"identity"`
	// Version is the tool's own answer, for tools outside the toolchains.
	Version string `json:"version,omitempty"`
}

// Marshal encodes l the way it is written: indented JSON, map keys sorted,
// source files sorted by path, one trailing newline. The same lock always
// gives the same bytes.
func Marshal(l *Lock) ([]byte, error) {
	c := *l
	c.Source.Files = append([]File(nil), l.Source.Files...)
	sort.Slice(c.Source.Files, func(i, j int) bool { return c.Source.Files[i].Path < c.Source.Files[j].Path })
	b, err := jsonfile.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode the lock: %w", err)
	}
	return b, nil
}

// Write writes l to path atomically: a reader sees the old lock or the
// new one, never a part.
func Write(path string, l *Lock) error {
	b, err := Marshal(l)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Read reads the lock at path. A missing file is (nil, nil): the recipe
// has no lock yet.
func Read(path string) (*Lock, error) {
	b, err := boundedfile.Read(path, boundedfile.LockLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the lock %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var l Lock
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("%s is not a lock edgepipe wrote (%v): delete it and run `edgepipe lock` to write it again", path, err)
	}
	if l.LockVersion != Version {
		return nil, fmt.Errorf("%s has lock_version %d; this edgepipe reads version %d: run `edgepipe lock` to write it again", path, l.LockVersion, Version)
	}
	return &l, nil
}

// Change is one field whose locked value differs from what resolves now.
// An empty value means the field is absent on that side.
type Change struct {
	Field  string `json:"field"`
	Locked string `json:"locked"`
	Now    string `json:"now"`
}

func (c Change) String() string {
	return fmt.Sprintf("%s: locked %s, now %s", c.Field, OrAbsent(c.Locked), OrAbsent(c.Now))
}

// OrAbsent shows an empty lock or current value as "(absent)".
func OrAbsent(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

// Diff lists every field where now differs from locked, sorted by field.
func Diff(locked, now *Lock) []Change {
	a, b := fields(locked), fields(now)
	names := map[string]bool{}
	for k := range a {
		names[k] = true
	}
	for k := range b {
		names[k] = true
	}
	var out []Change
	for k := range names {
		if a[k] != b[k] {
			out = append(out, Change{Field: k, Locked: a[k], Now: b[k]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return fieldLess(out[i].Field, out[j].Field) })
	return out
}

// fieldOrder puts what explains the rest first: a new platform or edgepipe
// version changes toolchain digests, a new source changes its files.
var fieldOrder = []string{"platform", "edgepipe_version", "source.uri", "source.resolved_revision", "source.files", "data", "toolchains", "tools"}

func fieldRank(f string) int {
	for i, p := range fieldOrder {
		if f == p || strings.HasPrefix(f, p+"[") || strings.HasPrefix(f, p+".") {
			return i
		}
	}
	return len(fieldOrder)
}

func fieldLess(a, b string) bool {
	if ra, rb := fieldRank(a), fieldRank(b); ra != rb {
		return ra < rb
	}
	return a < b
}

// fields flattens a lock into field name -> printable value.
func fields(l *Lock) map[string]string {
	m := map[string]string{
		"edgepipe_version":         l.EdgepipeVersion,
		"platform":                 l.Platform,
		"source.uri":               l.Source.URI,
		"source.resolved_revision": l.Source.Revision,
	}
	for _, f := range l.Source.Files {
		m["source.files["+f.Path+"]"] = fmt.Sprintf("sha256:%s (%d bytes)", f.SHA256, f.Size)
	}
	for ref, sha := range l.Data {
		m["data["+ref+"]"] = "sha256:" + sha
	}
	for name, tc := range l.Toolchains {
		m["toolchains."+name+".lock_digest"] = tc.LockDigest
		m["toolchains."+name+".versions"] = tc.Versions
	}
	for name, t := range l.Tools {
		m["tools."+name+".from"] = t.From
		m["tools."+name+".identity"] = t.Identity
		m["tools."+name+".version"] = t.Version
	}
	for k, v := range m {
		if v == "" {
			delete(m, k)
		}
	}
	return m
}

// MismatchError is a lock that does not match what the recipe resolves to
// now; its text lists each change and how to accept them.
type MismatchError struct {
	Path    string
	Recipe  string
	Changes []Change
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s does not match what %s resolves to now (%d change(s)):\n", e.Path, e.Recipe, len(e.Changes))
	for _, c := range e.Changes {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	for _, c := range e.Changes {
		if c.Field == "platform" {
			fmt.Fprintf(&b, "The lock was made on %s: a lock holds one platform's native tool builds, so run without --locked on this one, or keep a separate recipe for it.\n", OrAbsent(c.Locked))
			break
		}
	}
	fmt.Fprintf(&b, "If the change is intended, accept it with `edgepipe run --update-lock %s` (or `edgepipe lock %s`) and commit the new lock.", e.Recipe, e.Recipe)
	return b.String()
}

// Subset is a copy of locked with only the data files, toolchains and
// tools that now also has: what a run of some of a recipe's targets can
// check against the whole recipe's lock.
func Subset(locked, now *Lock) *Lock {
	out := *locked
	out.Data = subsetMap(locked.Data, now.Data)
	out.Toolchains = subsetMap(locked.Toolchains, now.Toolchains)
	out.Tools = subsetMap(locked.Tools, now.Tools)
	return &out
}

func subsetMap[V any](locked, now map[string]V) map[string]V {
	if locked == nil {
		return nil
	}
	out := map[string]V{}
	for k, v := range locked {
		if _, ok := now[k]; ok {
			out[k] = v
		}
	}
	return out
}
