// Package tools finds the tools step kinds run and identifies them: recipe
// overrides first, then --tool-path, then the installed pinned toolchains.
// A tool's identity (its bytes or its toolchain's lock) joins every cache key
// that uses it.
package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/proc"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

// Tool is a resolved tool: how to run it and what it is.
type Tool struct {
	Name string `json:"name"`
	// Argv is the prefix that runs the tool (interpreter and script, or the
	// executable).
	Argv []string `json:"argv"`
	// Identity digests what the tool is (executable and script bytes, the
	// toolchain lock); it is part of every cache key that uses the tool.
	Identity string `json:"identity"`
	Version  string `json:"version"`
	// StandIn is true when the executable says it is a stand-in for the real
	// tool (the test tier's tools do); manifests record it.
	StandIn bool   `json:"stand_in,omitempty"`
	Origin  string `json:"origin"` // "recipe", "tool-path", "toolchain NAME"
}

// Toolchains looks tools up in the installed, pinned toolchains.
type Toolchains interface {
	// Lookup returns the argv prefix that runs tool, the identity of the
	// toolchain providing it (its lock digest and build), its version, and
	// the toolchain's name. A tool that is not installed is an error whose
	// text says which command installs it.
	Lookup(tool string) (argv []string, identity, version, toolchain string, err error)
}

// Resolver finds tools: recipe overrides first, then the tool path
// (`--tool-path`, EDGEPIPE_TOOL_PATH), then the installed toolchains.
type Resolver struct {
	// Overrides maps a tool name to an executable path (recipe
	// `toolchains: {NAME: {tools: {...}}}`).
	Overrides map[string]string
	// Python overrides the interpreter for .py tools.
	Python string
	// Path lists folders searched for a tool by its name.
	Path       []string
	Toolchains Toolchains
	Memo       *digest.Memo

	mu    sync.Mutex
	cache map[string]*Tool
}

// Resolve returns the tool with the given name, resolving it once per run.
// Asking a tool for its version runs it: under ctx, in its own process
// group, killed with every helper it started when ctx ends.
func (tr *Resolver) Resolve(ctx context.Context, name string) (*Tool, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if t, ok := tr.cache[name]; ok {
		return t, nil
	}
	t, err := tr.resolve(ctx, name)
	if err != nil {
		return nil, err
	}
	if tr.cache == nil {
		tr.cache = map[string]*Tool{}
	}
	tr.cache[name] = t
	return t, nil
}

func (tr *Resolver) resolve(ctx context.Context, name string) (*Tool, error) {
	if p, ok := tr.Overrides[name]; ok {
		return tr.fromFile(ctx, name, p, "recipe")
	}
	for _, dir := range tr.Path {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return tr.fromFile(ctx, name, p, "tool-path")
		}
	}
	if tr.Toolchains == nil {
		return nil, fmt.Errorf("tool %s is not installed: run `edgepipe toolchain install`, or point --tool-path at a folder that has it", name)
	}
	argv, id, version, tc, err := tr.Toolchains.Lookup(name)
	if err != nil {
		return nil, err
	}
	if tr.Python != "" && strings.HasSuffix(name, ".py") && len(argv) == 2 {
		argv = []string{tr.Python, argv[1]}
	}
	return &Tool{Name: name, Argv: argv, Identity: id, Version: version, Origin: "toolchain " + tc,
		StandIn: strings.Contains(version, "stand-in")}, nil
}

// fromFile identifies a tool the user pointed at by the digest of its bytes
// and asks it for its version.
func (tr *Resolver) fromFile(ctx context.Context, name, path, origin string) (*Tool, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		if lp, lerr := exec.LookPath(path); lerr == nil {
			abs = lp
		} else {
			return nil, fmt.Errorf("tool %s: %s does not exist: fix the path in the recipe's toolchains section or --tool-path", name, path)
		}
	}
	argv := []string{abs}
	if strings.HasSuffix(abs, ".py") && !isExecutable(abs) {
		py := tr.Python
		if py == "" {
			py = "python3"
		}
		argv = []string{py, abs}
	}
	fd, err := tr.Memo.File(abs)
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", name, err)
	}
	version, err := toolVersion(ctx, argv)
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", name, err)
	}
	return &Tool{Name: name, Argv: argv, Identity: "sha256:" + fd.SHA256, Version: version, Origin: origin,
		StandIn: strings.Contains(version, "stand-in")}, nil
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

// toolVersion asks a tool for its version, briefly; tools that have no
// --version flag answer with usage text, of which the first line is kept.
// Only ctx ending is an error: a tool that cannot say is "unknown".
func toolVersion(ctx context.Context, argv []string) (string, error) {
	out := &cappedBuffer{max: 64 << 10}
	err := proc.Run(ctx, proc.Cmd{Argv: append(slices.Clone(argv), "--version"), Stdout: out,
		Timeout: versionTimeout, Grace: time.Second})
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	var ee *proc.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.TimedOut) {
		return "unknown", nil
	}
	for _, line := range strings.Split(out.String(), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "load_backend") {
			return line, nil
		}
	}
	return "unknown", nil
}

// versionTimeout bounds a --version probe.
const versionTimeout = 10 * time.Second

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}

// ForRecipe is the resolver of a run: the recipe's toolchains: overrides
// (paths relative to the recipe), then the folders of toolPath
// (':'-separated, --tool-path), then the installed toolchains. r may be nil.
func ForRecipe(r *recipe.Recipe, toolPath string, installed Toolchains) *Resolver {
	tr := &Resolver{Toolchains: installed}
	for _, d := range strings.Split(toolPath, string(os.PathListSeparator)) {
		if d != "" {
			tr.Path = append(tr.Path, d)
		}
	}
	if r == nil {
		return tr
	}
	for _, tc := range r.Toolchains {
		for name, p := range tc.Tools {
			if tr.Overrides == nil {
				tr.Overrides = map[string]string{}
			}
			if !filepath.IsAbs(p) && strings.Contains(p, "/") {
				p = filepath.Join(r.Dir(), p)
			}
			tr.Overrides[name] = p
		}
		if tc.Python != "" {
			tr.Python = tc.Python
		}
	}
	return tr
}

// Local reports whether a tool is found without the toolchains: a recipe
// override or a --tool-path folder has it.
func (tr *Resolver) Local(name string) bool {
	if _, ok := tr.Overrides[name]; ok {
		return true
	}
	for _, dir := range tr.Path {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}
