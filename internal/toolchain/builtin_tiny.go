package toolchain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/proc"
)

// tinyModel is a built-in tiny model of one common architecture, made
// here by tiny_model.py from the architecture's transformers config class
// with weights that are exact functions of their names (no download, no
// training), and the tokenizer of a built-in model. They test conversion
// mechanics and numerics, not quality.
type tinyModel struct {
	arch string // tiny_model.py --arch
	// architecture is the transformers class that loads it.
	architecture string
	// tokenizer is the built-in model whose tokenizer files it copies.
	tokenizer string
	// sha256 pins model.safetensors: the build is bit-identical on every
	// host, and a provisioning that makes other bytes fails.
	sha256 string
	note   string
}

var tinyModels = map[string]tinyModel{
	"tiny-llama": {arch: "llama", architecture: "LlamaForCausalLM", tokenizer: "smollm2-135m",
		sha256: "ba659508b42c69d6fe8bce475a8f8c3d6c4055158e9d6d62a9402ccde347f588",
		note:   "Llama 3 architecture (llama3 RoPE scaling, grouped-query attention, untied embeddings), 6.4M parameters, float32"},
	"tiny-qwen2": {arch: "qwen2", architecture: "Qwen2ForCausalLM", tokenizer: "smollm2-135m",
		sha256: "c187396ad74c4d1ccfe4d3fc60f0e9b95f53446ecd2b0360d057d8867e2c1324",
		note:   "Qwen2 architecture (q/k/v biases, grouped-query attention, tied embeddings), 3.3M parameters, float32"},
	"tiny-qwen3": {arch: "qwen3", architecture: "Qwen3ForCausalLM", tokenizer: "smollm2-135m",
		sha256: "b13b5f954ae92eed90de4c1689f478868bd1d5d5007a2b60013c9ffb4ee31d2c",
		note:   "Qwen3 architecture (q/k norms, grouped-query attention, tied embeddings), 3.3M parameters, float32"},
	"tiny-gemma3": {arch: "gemma3", architecture: "Gemma3ForCausalLM", tokenizer: "gemma3-270m",
		sha256: "05a88f4745926fd344d7b514f363113c71d58bf365bca65330384079310af6ce",
		note:   "Gemma 3 architecture (a 64-token sliding window on 5 of 6 layers, q/k norms, sandwich norms, one KV head, tied embeddings), 8.5M parameters, bfloat16, Gemma 3's tokenizer"},
	"tiny-phi3": {arch: "phi3", architecture: "Phi3ForCausalLM", tokenizer: "smollm2-135m",
		sha256: "8667734e397bbeeeabbefec5b54f5bb7d7ba2f83568e97f58d44a081a57d1165",
		note:   "Phi-3 architecture (fused qkv and gate_up projections, grouped-query attention, untied embeddings), 6.4M parameters, float32"},
	"tiny-mistral": {arch: "mistral", architecture: "MistralForCausalLM", tokenizer: "smollm2-135m",
		sha256: "ae28d5eae4aca632e75e81c2152b1652cfd341d94f3c9139a34b412231ec5ad5",
		note:   "Mistral architecture (a 64-token sliding window, grouped-query attention, untied embeddings), 6.4M parameters, float32"},
	"tiny-qwen3-moe": {arch: "qwen3-moe", architecture: "Qwen3MoeForCausalLM", tokenizer: "smollm2-135m",
		sha256: "62b1938dc406d7a7000892e387e58fd7b8d041a891f209a23b42b4a7d997caa5",
		note:   "Qwen3-MoE architecture (4 experts, top-2 routing, q/k norms, untied embeddings), 6.5M parameters, float32"},
	"tiny-mixtral": {arch: "mixtral", architecture: "MixtralForCausalLM", tokenizer: "smollm2-135m",
		sha256: "61a1d155921ae398ee4348200824b31a903c922738a045455c66b96b5ca6d1ea",
		note:   "Mixtral architecture (4 experts, top-2 routing, grouped-query attention, untied embeddings), 6.7M parameters, float32"},
}

// tinyText is the built-in text whose token counts shape a tiny model's
// output layer (not the evaluation text: a perplexity on it stays honest).
const tinyText = "calibration"

// IsTinyBuiltin reports whether src (builtin:NAME) names a built-in tiny
// model.
func IsTinyBuiltin(src string) bool {
	_, ok := tinyModels[strings.TrimPrefix(src, "builtin:")]
	return ok
}

// TinyArch is one built-in tiny model as tiny_model.py knows it.
type TinyArch struct {
	Name, Arch, Architecture, Tokenizer, SHA256 string
}

// TinyArchs lists the built-in tiny models, by name.
func TinyArchs() []TinyArch {
	var out []TinyArch
	for n, m := range tinyModels {
		out = append(out, TinyArch{Name: n, Arch: m.arch, Architecture: m.architecture, Tokenizer: m.tokenizer, SHA256: m.sha256})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// BuiltinTools are the helper scripts whose bytes make the built-in model
// src (builtin:NAME): they are in the fetch step's key.
func BuiltinTools(src string) []string {
	if IsVisionBuiltin(src) {
		return []string{VisionBuiltinTool(src)}
	}
	if IsTinyBuiltin(src) {
		return []string{ToolTinyModel, ToolGGUFToHF}
	}
	return []string{ToolGGUFToHF}
}

// tinyRoot is CACHE/models/builtin/NAME-KEY; the key covers the script's
// import closure, the architecture, the folder of the model whose
// tokenizer it copies (named by that model's own key), the text and the
// llama toolchain's lock.
func tinyRoot(cacheDir, name string) (string, tinyModel, error) {
	m := tinyModels[name]
	spec, err := Lookup(Llama)
	if err != nil {
		return "", m, err
	}
	id, err := HelperIdentity(ToolTinyModel)
	if err != nil {
		return "", m, err
	}
	tok, _, err := builtinRoot(cacheDir, m.tokenizer)
	if err != nil {
		return "", m, err
	}
	text, err := data.Bytes(tinyText)
	if err != nil {
		return "", m, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\narch %s\ntokenizer %s\ntext %x\nlock %s\n", ToolTinyModel, id, m.arch,
		filepath.Base(tok), sha256.Sum256(text), spec.Digest())
	return filepath.Join(cacheDir, "models", "builtin", name+"-"+hex.EncodeToString(h.Sum(nil)[:8])), m, nil
}

// tinyFiles must be in a tiny model's folder, not empty, for it to count
// as made: the weights, the config and the tokenizer.
var tinyFiles = []string{"config.json", "model.safetensors", "tokenizer_config.json"}

// provisionTiny makes a built-in tiny model once (provisionOnce): the
// model whose tokenizer it copies first, then tiny_model.py at one
// thread, whose model.safetensors must have the pinned digest.
func provisionTiny(ctx context.Context, cacheDir, name string, progress io.Writer) (string, error) {
	root, m, err := tinyRoot(cacheDir, name)
	if err != nil {
		return "", err
	}
	err = provisionOnce(ctx, root, name, progress, func(tmp string) (marker, error) {
		llama, err := Resolve(cacheDir, Llama)
		if err != nil {
			return marker{}, fmt.Errorf("built-in model %s is made with the %s toolchain: %w", name, Llama, err)
		}
		tok, err := provisionBuiltin(ctx, cacheDir, m.tokenizer, progress)
		if err != nil {
			return marker{}, fmt.Errorf("built-in model %s copies the tokenizer of builtin:%s: %w", name, m.tokenizer, err)
		}
		text, err := data.Materialize(tinyText, filepath.Join(tmp, "text"))
		if err != nil {
			return marker{}, err
		}
		argv, _, err := llama.Tool(ToolTinyModel)
		if err != nil {
			return marker{}, err
		}
		fmt.Fprintf(progress, "builtin:%s: make it (one thread, seconds)\n", name)
		hf := filepath.Join(tmp, "hf")
		logPath := filepath.Join(filepath.Dir(root), "logs", name+".log")
		err = proc.Run(ctx, proc.Cmd{
			Argv:    append(argv, "--arch", m.arch, "--tokenizer", tok, "--text", text, "--out", hf),
			Dir:     tmp,
			Env:     append(os.Environ(), oneThread...),
			LogPath: logPath,
			Stdout:  progress,
		})
		if err != nil {
			return marker{}, fmt.Errorf("make built-in model %s with %s: %w (log: %s)", name, ToolTinyModel, err, logPath)
		}
		if err := os.RemoveAll(filepath.Join(tmp, "text")); err != nil {
			return marker{}, err
		}
		for _, f := range tinyFiles {
			if st, err := os.Stat(filepath.Join(hf, f)); err != nil || st.Size() == 0 {
				return marker{}, fmt.Errorf("make built-in model %s: %s wrote no %s (log: %s)", name, ToolTinyModel, f, logPath)
			}
		}
		sum, err := fileDigest(filepath.Join(hf, "model.safetensors"))
		if err != nil {
			return marker{}, err
		}
		if sum != m.sha256 {
			return marker{}, fmt.Errorf("make built-in model %s: its model.safetensors has sha256 %s, edgepipe pins %s: %s did not rebuild the pinned bytes on this host (log: %s); report it, with the log, at the project's issue tracker",
				name, sum, m.sha256, ToolTinyModel, logPath)
		}
		return marker{Versions: map[string]string{"model": m.version(), "safetensors_sha256": sum,
			"tokenizer": "builtin:" + m.tokenizer + " (" + filepath.Base(filepath.Dir(tok)) + ")", "toolchain": llama.LockDigest}}, nil
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "hf"), nil
}

func (m tinyModel) version() string {
	return m.architecture + " made by " + ToolTinyModel + " --arch " + m.arch + " with builtin:" + m.tokenizer + "'s tokenizer"
}

// oneThread is the environment of a build whose bytes must not depend on
// the host's cores.
var oneThread = []string{"OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "EDGEPIPE_THREADS=1",
	"PYTHONHASHSEED=0", "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1"}
