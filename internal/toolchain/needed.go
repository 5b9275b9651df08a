package toolchain

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Need is a toolchain a recipe's steps need, and why.
type Need struct {
	Name string
	Kind string
	// Tools are the tools the steps run from it (empty when another
	// toolchain needs it: uv installs the Python ones).
	Tools []string
	// For names the toolchains that need it to be installed first.
	For []string
	// Installed: a complete install from the current lock is there.
	Installed bool
	// SizeHint says roughly how big an install is, for the message that
	// announces it.
	SizeHint string
}

// Needed returns the toolchains that provide tools (and the toolchains
// those need), in install order. local reports tools found elsewhere
// (the recipe's toolchains: overrides, --tool-path): those need nothing
// installed. Tools no toolchain provides are left to the run to report.
func Needed(cacheDir string, tools []string, local func(tool string) bool) []Need {
	return needs(cacheDir, func(add func(name, tool, forName string)) {
		for _, t := range tools {
			if local != nil && local(t) {
				continue
			}
			for _, spec := range Specs() {
				if spec.Kind != KindExternal && slices.Contains(spec.Tools, t) {
					add(spec.Name, t, "")
					break
				}
			}
		}
	})
}

// NeededNames is what installing the named toolchains installs: them and
// the toolchains they need, in install order.
func NeededNames(cacheDir string, names ...string) []Need {
	return needs(cacheDir, func(add func(name, tool, forName string)) {
		for _, name := range names {
			if spec, err := Lookup(name); err == nil {
				for _, t := range spec.Tools {
					add(name, t, "")
				}
			}
		}
	})
}

// needs collects what seed adds, with the toolchains each needs first.
func needs(cacheDir string, seed func(add func(name, tool, forName string))) []Need {
	want := map[string]*Need{}
	var add func(name, tool, forName string)
	add = func(name, tool, forName string) {
		spec, err := Lookup(name)
		if err != nil || spec.Kind == KindExternal {
			return
		}
		n := want[name]
		if n == nil {
			n = &Need{Name: name, Kind: spec.Kind, SizeHint: sizeHint(spec)}
			want[name] = n
		}
		if tool != "" && !slices.Contains(n.Tools, tool) {
			n.Tools = append(n.Tools, tool)
		}
		if forName != "" && !slices.Contains(n.For, forName) {
			n.For = append(n.For, forName)
		}
		for _, dep := range spec.Needs {
			add(dep, "", name)
		}
	}
	seed(add)
	var out []Need
	for _, spec := range Specs() {
		if n := want[spec.Name]; n != nil {
			_, err := Resolve(cacheDir, n.Name)
			n.Installed = err == nil
			out = append(out, *n)
		}
	}
	return out
}

// sizeHint is roughly what an install of this kind takes on disk (from
// installs measured on Linux x86-64; a rough figure for the announcement,
// not a measurement of this host).
func sizeHint(s Spec) string {
	switch s.Kind {
	case KindBinary:
		return "about 40 MB"
	case KindLlamaCpp:
		return "about 150 MB, built from source with cmake in a few minutes"
	case KindPython:
		if strings.Contains(s.Lock, "\ntorch==") {
			return "about 5 GB: PyTorch with its CUDA libraries"
		}
		return "a Python environment"
	}
	return ""
}

// Why is a need's reason in words: "llama-quantize, llama-perplexity",
// or "needed by llama".
func (n Need) Why() string {
	var parts []string
	if len(n.Tools) > 0 {
		parts = append(parts, "runs "+strings.Join(n.Tools, ", "))
	}
	if len(n.For) > 0 {
		parts = append(parts, "needed to install "+strings.Join(n.For, ", "))
	}
	return strings.Join(parts, "; ")
}

// lastUsedFile is touched in an install folder each time a run uses it.
const lastUsedFile = ".last-used"

// MarkUsed records that a run used the named toolchain now.
func MarkUsed(cacheDir, name string) {
	spec, err := Lookup(name)
	if err != nil || spec.Kind == KindExternal {
		return
	}
	p := filepath.Join(toolchainsDir(cacheDir), spec.DirName(), lastUsedFile)
	now := time.Now()
	if err := os.Chtimes(p, now, now); errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(filepath.Dir(p)); serr == nil {
			_ = os.WriteFile(p, nil, 0o644)
		}
	}
}

// Folder is one folder under CACHE/toolchains: an install (current or
// from an older lock), the helper scripts, or an interrupted install.
type Folder struct {
	Name string // toolchain name ("" when unknown)
	Dir  string
	// Size is its files' bytes, hard links counted once; Own the part no
	// path outside it reaches (what removing it frees: uv's cache keeps
	// the wheel files every environment links).
	Size, Own int64
	// LastUsed is when a run last used it (else when it was installed).
	LastUsed time.Time
	// Current: the install the current lock names; stale folders can go.
	Current bool
}

// Folders lists CACHE/toolchains with each folder's size and last use.
func Folders(cacheDir string) ([]Folder, error) {
	folders, _, err := foldersAndTotal(cacheDir)
	return folders, err
}

// foldersAndTotal is Folders and the bytes all of them hold, each file
// once: one walk of the folders gives both.
func foldersAndTotal(cacheDir string) ([]Folder, int64, error) {
	root := toolchainsDir(cacheDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(root, e.Name()))
		}
	}
	use := MeasureDisk(dirs...)
	current := map[string]string{"helpers-" + helpersDigest()[:16]: "helpers", "logs": "logs"}
	for _, s := range Specs() {
		if s.Kind != KindExternal {
			current[s.DirName()] = s.Name
		}
	}
	var out []Folder
	for _, dir := range dirs {
		f := Folder{Dir: dir, Size: use.Bytes[dir], Own: use.Own[dir]}
		f.Name, f.Current = current[filepath.Base(dir)]
		if !f.Current {
			if m, err := readMarker(dir); err == nil {
				f.Name = m.Name
			}
		}
		for _, p := range []string{lastUsedFile, markerFile} {
			if st, err := os.Stat(filepath.Join(dir, p)); err == nil {
				f.LastUsed = st.ModTime()
				break
			}
		}
		if f.LastUsed.IsZero() {
			if st, err := os.Stat(dir); err == nil {
				f.LastUsed = st.ModTime()
			}
		}
		out = append(out, f)
	}
	return out, use.Total, nil
}

// Remove deletes the current install of the named toolchain.
func Remove(cacheDir, name string) (Folder, error) {
	spec, err := Lookup(name)
	if err != nil {
		return Folder{}, err
	}
	if spec.Kind == KindExternal {
		return Folder{}, fmt.Errorf("%s is not installed by edgepipe: %s", name, spec.Note)
	}
	dir := filepath.Join(toolchainsDir(cacheDir), spec.DirName())
	if _, err := os.Stat(dir); err != nil {
		return Folder{}, fmt.Errorf("toolchain %s is not installed (no %s)", name, dir)
	}
	f := Folder{Name: name, Dir: dir, Size: DirSize(dir), Current: true}
	return f, RemoveFolder(cacheDir, f)
}

// RemoveFolder deletes a toolchain folder, holding the toolchain's
// install lock so that an install in progress is not cut in half.
func RemoveFolder(cacheDir string, f Folder) error {
	if f.Name != "" && f.Name != "helpers" && f.Name != "logs" {
		unlock, err := tryLockFile(filepath.Join(toolchainsDir(cacheDir), "."+f.Name+".lock"))
		if err != nil {
			return fmt.Errorf("remove %s: %w", f.Dir, err)
		}
		defer unlock()
	}
	return os.RemoveAll(f.Dir)
}

// DirSize is the bytes of the regular files under dir, each file once
// however many hard links to it the folder holds.
func DirSize(dir string) int64 { return MeasureDisk(dir).Bytes[dir] }
