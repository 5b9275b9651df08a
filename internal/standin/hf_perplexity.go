package standin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func init() { Tools["hf_perplexity.py"] = hfPerplexity }

// hfPerplexity: hf_perplexity.py --model DIR --text FILE --ctx N [--chunks K].
// Like the real script it needs a checkpoint and at least two chunks of
// text; its perplexity is the same function of the text as the stand-in
// llama-perplexity's F16 baseline.
func hfPerplexity(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hf_perplexity", flag.ContinueOnError)
	model := fs.String("model", "", "")
	textFile := fs.String("text", "", "")
	nctx := fs.Int("ctx", 512, "")
	chunks := fs.Int("chunks", -1, "")
	fs.String("add-bos", "auto", "")
	fs.Int("threads", 0, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *textFile == "" {
		return errors.New("usage: hf_perplexity.py --model DIR --text FILE [--ctx N] [--chunks K]")
	}
	if _, err := CheckpointDigest(*model); err != nil {
		return err
	}
	ppl, tokens, n, err := EvalChunks(*textFile, *nctx, *chunks)
	if err != nil {
		return err
	}
	scored := n * (*nctx - 1 - *nctx/2)
	fmt.Fprintf(stderr, "[%d/%d] ppl so far %.4f\n", n, n, ppl)
	return json.NewEncoder(stdout).Encode(map[string]any{"ppl": ppl, "tokens": tokens, "chunks": n,
		"ctx": *nctx, "scored": scored, "add_bos": false})
}

// CheckpointDigest digests a Hugging Face checkpoint's config and weights,
// refusing a folder that is not one.
func CheckpointDigest(dir string) (string, error) {
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return "", fmt.Errorf("no config.json in %s: not a Hugging Face checkpoint", dir)
	}
	shards, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(shards) == 0 {
		return "", fmt.Errorf("no *.safetensors in %s", dir)
	}
	return DigestFiles(cfg, shards...)
}

// DigestFiles is the hex sha256 over head and the named files' bytes.
func DigestFiles(head []byte, files ...string) (string, error) {
	h := sha256.New()
	h.Write(head)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
