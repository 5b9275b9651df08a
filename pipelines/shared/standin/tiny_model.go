package standin

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
)

func init() { standin.Tools["tiny_model.py"] = tinyModel }

// tinyModel: tiny_model.py --arch A --tokenizer DIR --text FILE --out DIR.
// Like the real script it knows only the built-in tiny models'
// architectures, needs a tokenizer folder and a text, and writes a
// checkpoint (config.json naming the architecture's class, the tokenizer
// files copied, model.safetensors) whose weights are a deterministic
// function of the architecture, the tokenizer's files and the text: one
// float32 tensor, small integers times 2**-10 as the real weights are.
func tinyModel(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tiny_model", flag.ContinueOnError)
	arch := fs.String("arch", "", "")
	tok := fs.String("tokenizer", "", "")
	textFile := fs.String("text", "", "")
	out := fs.String("out", "", "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *arch == "" || *tok == "" || *textFile == "" || *out == "" {
		return errors.New("usage: tiny_model.py --arch ARCH --tokenizer DIR --text FILE --out DIR")
	}
	var class string
	var archs []string
	for _, a := range toolchain.TinyArchs() {
		archs = append(archs, a.Arch)
		if a.Arch == *arch {
			class = a.Architecture
		}
	}
	if class == "" {
		return fmt.Errorf("argument --arch: invalid choice: %q (choose from %s)", *arch, strings.Join(archs, ", "))
	}
	text, err := os.ReadFile(*textFile)
	if err != nil {
		return err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%x\n", *arch, sha256.Sum256(text))
	if err := copyTokenizer(*tok, *out, h); err != nil {
		return err
	}
	const rows, cols = 16, 8
	weights := stream(h.Sum(nil), rows*cols)
	st, err := safetensorsF32("model.embed_tokens.weight", []int{rows, cols}, weights)
	if err != nil {
		return err
	}
	config := fmt.Sprintf(`{"architectures": [%q], "hidden_size": %d, "num_hidden_layers": 1, "num_attention_heads": 1, "vocab_size": %d, "max_position_embeddings": 4096}`+"\n", class, cols, rows)
	if err := os.WriteFile(filepath.Join(*out, "config.json"), []byte(config), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "model.safetensors"), st, 0o644); err != nil {
		return err
	}
	ents, err := os.ReadDir(*out)
	if err != nil {
		return err
	}
	var files []string
	for _, e := range ents {
		files = append(files, e.Name())
	}
	sort.Strings(files)
	sum := sha256.Sum256(st)
	line, err := json.Marshal(report.TinyModel{Arch: *arch, Architecture: class, Parameters: rows * cols, DType: "float32",
		VocabSize: rows, TextTokens: len(strings.Fields(string(text))), Features: []string{"stand-in"},
		Bytes: int64(len(st)), SHA256: hex.EncodeToString(sum[:]), Files: files})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(line))
	return nil
}

// copyTokenizer copies the tokenizer files (what is not a model's) into
// out, digesting their names and bytes into h; a folder without a
// tokenizer is refused.
func copyTokenizer(from, out string, h io.Writer) error {
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	found := false
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || n == "config.json" || n == "generation_config.json" || n == "model.safetensors" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, n))
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %x\n", n, sha256.Sum256(b))
		if err := os.WriteFile(filepath.Join(out, n), b, 0o644); err != nil {
			return err
		}
		found = found || n == "tokenizer.json" || n == "tokenizer.model"
	}
	if !found {
		return fmt.Errorf("%s has no tokenizer.json or tokenizer.model: not a tokenizer's folder", from)
	}
	return nil
}

// stream is n float32 values in [-0.25, 0.25], exact multiples of 2**-10,
// from the hash chain of seed.
func stream(seed []byte, n int) []float32 {
	out := make([]float32, 0, n)
	block := seed
	for len(out) < n {
		s := sha256.Sum256(block)
		block = s[:]
		for i := 0; i+2 <= len(s) && len(out) < n; i += 2 {
			k := int(binary.LittleEndian.Uint16(s[i:])%513) - 256
			out = append(out, float32(k)/1024)
		}
	}
	return out
}

// safetensorsF32 is a safetensors file holding one float32 tensor.
func safetensorsF32(name string, shape []int, vals []float32) ([]byte, error) {
	header, err := json.Marshal(map[string]any{
		"__metadata__": map[string]string{"format": "pt"},
		name:           map[string]any{"dtype": "F32", "shape": shape, "data_offsets": []int{0, 4 * len(vals)}},
	})
	if err != nil {
		return nil, err
	}
	for len(header)%8 != 0 {
		header = append(header, ' ')
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b, nil
}
