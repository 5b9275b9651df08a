package toolchain

import (
	"context"
	"os/exec"
	"strings"
	"time"
)

// ToolStatus is one line of `edgepipe doctor`.
type ToolStatus struct {
	Name      string `json:"name"`
	Toolchain string `json:"toolchain"`
	Found     bool   `json:"found"`
	Version   string `json:"version,omitempty"`
	Path      string `json:"path,omitempty"`
	// InstallCommand is the exact command that installs the tool; empty
	// when edgepipe cannot install it (Note says what to do instead).
	InstallCommand string `json:"install_command,omitempty"`
	Note           string `json:"note,omitempty"`
}

// Doctor reports every tool edgepipe uses: installed or not, its version
// and path, and how to install what is missing. It reads only.
func Doctor(cacheDir string) []ToolStatus {
	var out []ToolStatus
	for _, spec := range Specs() {
		if spec.Kind == KindExternal {
			for _, t := range spec.Tools {
				st := ToolStatus{Name: t, Toolchain: spec.Name, Note: spec.Note}
				if p, err := exec.LookPath(t); err == nil {
					st.Found, st.Path = true, p
					st.Version = toolVersion(context.Background(), p)
					if spec.FromPath {
						st.Version = stdoutVersion(p)
					}
					st.Note = ""
				}
				out = append(out, st)
			}
			continue
		}
		inst, err := Resolve(cacheDir, spec.Name)
		for _, t := range spec.Tools {
			st := ToolStatus{Name: t, Toolchain: spec.Name, Note: spec.Note}
			if err != nil {
				st.InstallCommand = "edgepipe toolchain install " + spec.Name
				st.Note = err.Error()
				out = append(out, st)
				continue
			}
			st.Found, st.Path, st.Version = true, inst.Tools[t], inst.Summary()
			if inst.Python == "" && strings.HasSuffix(t, ".py") {
				st.Found = false
				st.InstallCommand = "edgepipe toolchain install " + Llama
				st.Note = "needs the " + Llama + " toolchain's Python"
			}
			out = append(out, st)
		}
	}
	for _, name := range BuiltinNames() {
		note, version := builtinModels[name].note, builtinModels[name].version
		if m, ok := tinyModels[name]; ok {
			note, version = m.note, m.version()
		}
		if m, ok := visionModels[name]; ok {
			version = m.version
		}
		st := ToolStatus{Name: "builtin:" + name, Toolchain: "model", Note: note}
		if dir, err := builtinDir(cacheDir, name); err == nil {
			st.Found, st.Path = true, dir
			st.Version = version
		} else {
			st.InstallCommand = "edgepipe toolchain install builtin:" + name
		}
		out = append(out, st)
	}
	return out
}

// externalNote is the install hint of an external prerequisite.
func externalNote(name string) string {
	if s, err := Lookup(name); err == nil {
		return s.Note
	}
	return "install " + name
}

// toolVersion asks an executable for its version and keeps the first line
// that says something ("version: 1 (0c1e570)" for llama.cpp's tools, which
// print it on stderr).
func toolVersion(ctx context.Context, path string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "load_backend") {
			return l
		}
	}
	return ""
}

// stdoutVersion is the first line a tool prints on stdout for --version
// (Debian's chromium wrapper prints shell noise on stderr first).
func stdoutVersion(path string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, path, "--version").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
