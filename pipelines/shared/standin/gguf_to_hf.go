// Package standin holds the stand-ins of the tools the shared step kinds run:
// gguf_to_hf.py (a GGUF source), hf_perplexity.py (the baseline),
// contract.py (the behavioural contract), generate_reference.py and
// tiny_model.py (a built-in tiny model).
package standin

import (
	"sort"

	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/edgepipe/edgepipe/internal/gguf"
	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"io"
	"os"
	"path/filepath"
)

func init() { standin.Tools["gguf_to_hf.py"] = ggufToHF }

// ggufToHF: gguf_to_hf.py --gguf FILE --out DIR [--info FILE]. Like the
// real script it reads the GGUF's header (gguf-py there, internal/gguf
// here) and refuses a file that is not one; the file type and tensor
// types it reports are the header's, and the checkpoint it writes is the
// GGUF's bytes after the magic (so a changed GGUF changes the weights), a
// config.json and a tokenizer file.
func ggufToHF(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gguf_to_hf", flag.ContinueOnError)
	in := fs.String("gguf", "", "")
	out := fs.String("out", "", "")
	info := fs.String("info", "", "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return errors.New("usage: gguf_to_hf.py --gguf FILE --out DIR [--info FILE]")
	}
	h, err := gguf.ReadFile(*in)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	fileType, _ := h.FileType()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	files := map[string][]byte{
		"model.safetensors": b[4:],
		"config.json":       []byte(`{"architectures": ["LlamaForCausalLM"], "hidden_size": 512, "max_position_embeddings": 8192}` + "\n"),
		"tokenizer.json":    []byte(`{"stand_in": true}` + "\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(*out, name), data, 0o644); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	line, err := json.Marshal(report.GGUFToHF{Out: *out, Architecture: "LlamaForCausalLM", Parameters: h.Params(), Tokenizer: "stand-in",
		AddBOS: true, FileType: fileType, TensorTypes: h.TensorTypes(), Files: names})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(line))
	if *info != "" {
		return os.WriteFile(*info, append(line, '\n'), 0o644)
	}
	return nil
}
