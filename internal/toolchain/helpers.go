package toolchain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
)

// Helper scripts are owned by the packages that run them (each format
// family embeds its own python/ folder; the shared library of scoring,
// data and environment modules is one more owner) and handed to this
// package as file systems, so the toolchain layer never imports the
// layers above it. At run time every helper lives in one flat folder,
// which is what lets a helper import a module of another owner by name.
var helperRegistry = struct {
	sync.RWMutex
	owner map[string]string // file name -> owner
	files map[string][]byte // file name -> bytes
}{owner: map[string]string{}, files: map[string][]byte{}}

// RegisterHelpers adds the *.py files at the top of fsys, under owner (a
// package path, for error messages). Two owners shipping a file of the
// same name is a programming error: one flat folder holds them all.
func RegisterHelpers(owner string, fsys fs.FS) {
	names, err := fs.Glob(fsys, "*.py")
	if err != nil {
		panic(fmt.Sprintf("toolchain: helpers of %s: %v", owner, err))
	}
	if len(names) == 0 {
		panic(fmt.Sprintf("toolchain: %s registers helpers but its file system holds no *.py", owner))
	}
	helperRegistry.Lock()
	defer helperRegistry.Unlock()
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			panic(fmt.Sprintf("toolchain: helper %s of %s: %v", n, owner, err))
		}
		if prev, dup := helperRegistry.owner[n]; dup {
			if prev == owner {
				continue // registered again by the same owner (tests)
			}
			panic(fmt.Sprintf("toolchain: helper %s is shipped by both %s and %s", n, prev, owner))
		}
		helperRegistry.owner[n] = owner
		helperRegistry.files[n] = b
	}
}

// HelperNames lists the registered helper files, sorted.
func HelperNames() []string {
	helperRegistry.RLock()
	defer helperRegistry.RUnlock()
	out := make([]string, 0, len(helperRegistry.files))
	for n := range helperRegistry.files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// HelperOwner names the package that ships a helper ("" when none does).
func HelperOwner(name string) string {
	helperRegistry.RLock()
	defer helperRegistry.RUnlock()
	return helperRegistry.owner[name]
}

// Helper returns a registered helper's bytes.
func Helper(name string) ([]byte, error) {
	helperRegistry.RLock()
	defer helperRegistry.RUnlock()
	b, ok := helperRegistry.files[name]
	if !ok {
		return nil, fmt.Errorf("no helper script %s is registered (the package that ships it is not linked into this program)", name)
	}
	return b, nil
}

// pyImport matches the import statements of edgepipe's helper scripts.
var pyImport = regexp.MustCompile(`(?m)^\s*(?:from\s+([A-Za-z_]\w*)\s+import|import\s+([A-Za-z_]\w*))`)

// HelperClosure is a helper and the registered helpers it imports,
// directly or through each other: the script first, the modules in name
// order. It is the one definition of what a helper's identity covers
// (a tool's cache identity, a built-in model's key): a change to any of
// these files changes what the helper computes.
func HelperClosure(script string) ([]string, error) {
	if _, err := Helper(script); err != nil {
		return nil, err
	}
	seen := map[string]bool{script: true}
	queue := []string{script}
	var mods []string
	for len(queue) > 0 {
		b, _ := Helper(queue[0])
		queue = queue[1:]
		for _, m := range pyImport.FindAllStringSubmatch(string(b), -1) {
			name := m[1] + m[2] + ".py"
			if seen[name] {
				continue
			}
			seen[name] = true
			if _, err := Helper(name); err != nil {
				continue // a library, not a helper
			}
			mods = append(mods, name)
			queue = append(queue, name)
		}
	}
	sort.Strings(mods)
	return append([]string{script}, mods...), nil
}

// HelperIdentity is the digest of a helper's closure: names and bytes.
func HelperIdentity(script string) (string, error) {
	files, err := HelperClosure(script)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range files {
		b, _ := Helper(f)
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "%s %x\n", f, sum)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// helpersDigest is the sha256 over every registered helper's name and
// bytes: it names the folder they are written to.
func helpersDigest() string {
	h := sha256.New()
	for _, n := range HelperNames() {
		b, _ := Helper(n)
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "%s %x\n", n, sum)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// MaterializeHelpers writes the registered helper scripts to
// CACHE/toolchains/helpers-DIGEST (once; the folder name pins the bytes)
// and returns that folder.
func MaterializeHelpers(cacheDir string) (string, error) {
	root := toolchainsDir(cacheDir)
	digest := helpersDigest()
	dir := filepath.Join(root, "helpers-"+digest[:16])
	if _, err := os.Stat(filepath.Join(dir, markerFile)); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, ".tmp-helpers-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, n := range HelperNames() {
		b, _ := Helper(n)
		if err := os.WriteFile(filepath.Join(tmp, path.Base(n)), b, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, markerFile), []byte(digest+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// A concurrent edgepipe wrote the same bytes first.
		if _, serr := os.Stat(filepath.Join(dir, markerFile)); serr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("write helper scripts: %w", err)
	}
	return dir, nil
}

// Dir is fsys's folder dir, for a package handing its embedded python/
// folder to RegisterHelpers (a missing folder is a programming error).
func Dir(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(fmt.Sprintf("toolchain: %s: %v", dir, err))
	}
	return sub
}
