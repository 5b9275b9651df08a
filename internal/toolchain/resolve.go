package toolchain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Installed is an installed toolchain.
type Installed struct {
	Name string
	Dir  string
	// Python is the interpreter that runs the toolchain's .py tools ("" if
	// it has none).
	Python string
	// Tools maps a tool name to its absolute path (executables and .py
	// scripts alike).
	Tools map[string]string
	// Versions records what is installed (package versions, the llama.cpp
	// commit, the Python version); manifests carry it.
	Versions map[string]string
	// LockDigest is "sha256:..." of the lock or build pin the install was
	// made from.
	LockDigest string

	kind string
	// pythonDigest is the lock digest of the toolchain whose interpreter
	// runs this one's scripts, when that is another toolchain.
	pythonDigest string
}

// Resolve returns the installed toolchain, or an error saying how to
// install it. It only reads, except that it writes the embedded Python
// helper scripts into the cache the first time they are asked for.
func Resolve(cacheDir, name string) (*Installed, error) {
	spec, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if spec.Kind == KindExternal {
		return nil, fmt.Errorf("%s is not an edgepipe toolchain: %s", name, spec.Note)
	}
	dir := filepath.Join(toolchainsDir(cacheDir), spec.DirName())
	m, err := readMarker(dir)
	if err != nil {
		return nil, fmt.Errorf("toolchain %s is not installed: run `edgepipe toolchain install %s`", name, name)
	}
	if m.Name != spec.Name || m.LockDigest != spec.Digest() {
		return nil, fmt.Errorf("toolchain %s in %s was installed from another lock: run `edgepipe toolchain install %s`", name, dir, name)
	}
	inst := &Installed{
		Name: name, Dir: dir, Tools: map[string]string{}, Versions: m.Versions,
		LockDigest: "sha256:" + m.LockDigest, kind: spec.Kind,
	}
	switch spec.Kind {
	case KindBinary:
		for _, t := range spec.Tools {
			inst.Tools[t] = filepath.Join(dir, "bin", t)
		}
	case KindPython:
		inst.Python = filepath.Join(dir, "bin", "python")
		inst.Tools[ToolPython] = inst.Python
		helpers, err := MaterializeHelpers(cacheDir)
		if err != nil {
			return nil, err
		}
		for _, t := range spec.Tools {
			// A helper no linked package registered is not this program's
			// to run (a test binary without the families); asking for it
			// says so (Tool).
			if _, err := Helper(t); err == nil && strings.HasSuffix(t, ".py") {
				inst.Tools[t] = filepath.Join(helpers, t)
			}
		}
	case KindLlamaCpp:
		for _, t := range llamaCppTargets {
			inst.Tools[t] = filepath.Join(dir, "bin", t)
		}
		inst.Tools[ToolConvertHF] = filepath.Join(dir, "src", ToolConvertHF)
		// The converter runs with the llama toolchain's interpreter.
		if py, err := Resolve(cacheDir, Llama); err == nil {
			inst.Python, inst.pythonDigest = py.Python, py.LockDigest
		}
	}
	for t, p := range inst.Tools {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("toolchain %s in %s is damaged (%s is missing): delete that folder and run `edgepipe toolchain install %s`", name, dir, t, name)
		}
	}
	return inst, nil
}

func readMarker(dir string) (marker, error) {
	var m marker
	b, err := os.ReadFile(filepath.Join(dir, markerFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(dir, markerFile), err)
	}
	if m.Format != markerFormat {
		return m, fmt.Errorf("%s: marker format %d, want %d", dir, m.Format, markerFormat)
	}
	return m, nil
}

// Tool returns how to run a tool of this toolchain: the argv prefix
// (interpreter first for .py tools) and its identity for cache keys: the
// toolchain's lock digest, plus the interpreter's toolchain and, for the
// embedded helpers, the script's own digest.
func (in *Installed) Tool(tool string) (argv []string, identity string, err error) {
	p, ok := in.Tools[tool]
	if !ok {
		if _, err := Helper(tool); err != nil && strings.HasSuffix(tool, ".py") {
			return nil, "", fmt.Errorf("toolchain %s: %w", in.Name, err)
		}
		return nil, "", fmt.Errorf("toolchain %s has no tool %s", in.Name, tool)
	}
	identity = in.LockDigest
	if !strings.HasSuffix(tool, ".py") {
		return []string{p}, identity, nil
	}
	if in.Python == "" {
		return nil, "", fmt.Errorf("%s needs the %s toolchain's Python: run `edgepipe toolchain install %s`", tool, Llama, Llama)
	}
	if in.pythonDigest != "" {
		identity += "+" + in.pythonDigest
	}
	if in.kind == KindPython {
		// The script and every helper module it imports (ppl_scoring.py,
		// ...): a change to either changes what the tool computes.
		id, err := HelperIdentity(tool)
		if err != nil {
			return nil, "", err
		}
		identity += "+" + id
	}
	return []string{in.Python, p}, identity, nil
}

// FindTool looks a tool up across the installed toolchains, in the shape
// of tools.Toolchains.Lookup: argv prefix, identity, a version string
// for manifests and the toolchain's name.
func FindTool(cacheDir, tool string) (argv []string, identity, version, toolchain string, err error) {
	for _, spec := range Specs() {
		if spec.Kind == KindExternal || !slices.Contains(spec.Tools, tool) {
			continue
		}
		inst, err := Resolve(cacheDir, spec.Name)
		if err != nil {
			return nil, "", "", "", fmt.Errorf("tool %s: %w", tool, err)
		}
		argv, identity, err := inst.Tool(tool)
		if err != nil {
			return nil, "", "", "", err
		}
		return argv, identity, inst.Summary(), spec.Name, nil
	}
	for _, spec := range Specs() {
		if spec.Kind == KindExternal && spec.FromPath && slices.Contains(spec.Tools, tool) {
			if p, err := exec.LookPath(tool); err == nil {
				version := stdoutVersion(p)
				// A system package is identified by where it is and the
				// version it reports: hashing a 250 MB browser per run
				// would cost more than the step it serves.
				sum := sha256.Sum256([]byte(p + "\n" + version))
				return []string{p}, "sha256:" + hex.EncodeToString(sum[:]), version, spec.Name, nil
			}
		}
	}
	for _, spec := range Specs() {
		if spec.Kind == KindExternal && slices.Contains(spec.Tools, tool) && spec.Note != "" {
			// Something edgepipe cannot install: say how to get it.
			return nil, "", "", "", fmt.Errorf("%s: %s", tool, spec.Note)
		}
	}
	return nil, "", "", "", fmt.Errorf("no edgepipe toolchain provides %s: point the recipe's toolchains section or --tool-path at it", tool)
}

// Summary is a one-line version string: the versions that matter most.
func (in *Installed) Summary() string { return in.summary(false) }

// PinnedSummary is Summary with the interpreter's version cut to
// major.minor: uv builds the environment on whichever Python 3.11 the
// machine has, so the patch level is not pinned and differs between
// machines with the same lock (lock files must not).
func (in *Installed) PinnedSummary() string { return in.summary(true) }

func (in *Installed) summary(pinnedOnly bool) string {
	spec, _ := Lookup(in.Name)
	keys := spec.Packages
	var parts []string
	for _, k := range keys {
		if v := in.Versions[k]; v != "" {
			if pinnedOnly && k == "python" {
				v = majorMinor(v)
			}
			parts = append(parts, k+" "+v)
		}
	}
	if spec.ExtraVersion != nil {
		if label, v := spec.ExtraVersion(in.Dir); v != "" {
			parts = append(parts, label+" "+v)
		}
	}
	if len(parts) == 0 {
		return in.Name
	}
	return strings.Join(parts, ", ")
}

// majorMinor cuts "3.11.7" to "3.11".
func majorMinor(v string) string {
	if i := strings.Index(v, "."); i >= 0 {
		if j := strings.Index(v[i+1:], "."); j >= 0 {
			return v[:i+1+j]
		}
	}
	return v
}

// Finder looks tools up in the toolchains installed under CacheRoot (the
// tool resolver's last resort).
type Finder struct{ CacheRoot string }

// Lookup is FindTool.
func (f Finder) Lookup(tool string) ([]string, string, string, string, error) {
	return FindTool(f.CacheRoot, tool)
}
