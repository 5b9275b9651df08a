// Package standin holds the GGUF family's stand-ins: convert_hf_to_gguf.py,
// llama-quantize, llama-perplexity, llama-imatrix and llama-bench, each
// reading its real inputs and deriving its outputs from them (see
// internal/standin).
package standin

import (
	"bytes"
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
)

func init() {
	standin.Tools["convert_hf_to_gguf.py"] = convert
	standin.Tools["llama-quantize"] = quantize
	standin.Tools["llama-perplexity"] = perplexity
	standin.Tools["llama-imatrix"] = imatrix
	standin.Tools["llama-bench"] = llamaBench
	standin.Tools["llama-tokenize"] = tokenize
}

// header is the stand-in GGUF's metadata, after the magic.
type header struct {
	StandIn      bool    `json:"standin"`
	Type         string  `json:"type"`
	Bits         float64 `json:"bits"`
	HiddenSize   int     `json:"hidden_size"`
	SourceSHA256 string  `json:"source_sha256"`
	Imatrix      string  `json:"imatrix,omitempty"`
	// Tokenizer is what the converter wrote of the checkpoint's tokenizer
	// (standin.GGUFTokenizerKeys: tokenizer.* keys, the files' digest for
	// the vocabulary); absent when the checkpoint shipped none.
	Tokenizer map[string]any `json:"tokenizer,omitempty"`
}

// Bits per weight of the types the stand-in knows (llama.cpp's figures).
var typeBits = map[string]float64{
	"F32": 32, "F16": 16, "BF16": 16, "Q8_0": 8.5, "Q6_K": 6.56, "Q5_K_M": 5.5, "Q5_K_S": 5.5,
	"Q5_0": 5.5, "Q5_1": 6, "Q4_K_M": 4.85, "Q4_K_S": 4.58, "Q4_0": 4.5, "Q4_1": 5,
	"Q3_K_M": 3.9, "Q3_K_S": 3.5, "Q3_K_L": 4.3, "Q2_K": 2.6, "IQ4_XS": 4.25, "IQ4_NL": 4.5,
}

func writeGGUF(path string, h header, payload []byte) error {
	meta, err := json.Marshal(h)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.WriteString("GGUF")
	binary.Write(&buf, binary.LittleEndian, uint32(3))
	binary.Write(&buf, binary.LittleEndian, uint32(len(meta)))
	buf.Write(meta)
	buf.Write(payload)
	tmp := path + ".part"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readGGUF(path string) (header, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return header{}, nil, err
	}
	if len(b) < 12 || string(b[:4]) != "GGUF" {
		return header{}, nil, fmt.Errorf("%s is not a GGUF file", path)
	}
	n := binary.LittleEndian.Uint32(b[8:12])
	if int(n) > len(b)-12 {
		return header{}, nil, fmt.Errorf("%s: truncated header", path)
	}
	var h header
	if err := json.Unmarshal(b[12:12+n], &h); err != nil {
		return header{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, b[12+n:], nil
}

// convert: convert_hf_to_gguf.py SRC --outtype T --outfile OUT
func convert(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	outtype := fs.String("outtype", "f16", "")
	outfile := fs.String("outfile", "", "")
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return err
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	if len(pos) != 1 || *outfile == "" {
		return errors.New("usage: convert_hf_to_gguf.py MODEL_DIR --outtype T --outfile OUT")
	}
	src := pos[0]
	cfgBytes, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		return fmt.Errorf("no config.json in %s", src)
	}
	var cfg struct {
		HiddenSize int `json:"hidden_size"`
	}
	if err := json.Unmarshal(cfgBytes, &cfg); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	shards, _ := filepath.Glob(filepath.Join(src, "*.safetensors"))
	if len(shards) == 0 {
		return fmt.Errorf("no *.safetensors in %s", src)
	}
	sort.Strings(shards)
	h := sha256.New()
	h.Write(cfgBytes)
	var payload []byte
	for _, s := range shards {
		b, err := os.ReadFile(s)
		if err != nil {
			return err
		}
		h.Write(b)
		payload = append(payload, b...)
	}
	typ := strings.ToUpper(*outtype)
	bits, ok := typeBits[typ]
	if !ok {
		return fmt.Errorf("unsupported outtype %s", *outtype)
	}
	tok, err := standin.GGUFTokenizerKeys(src)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "INFO:hf-to-gguf:Loading model: %s\nINFO:hf-to-gguf:Model successfully exported to %s\n", filepath.Base(src), *outfile)
	return writeGGUF(*outfile, header{StandIn: true, Type: typ, Bits: bits, HiddenSize: cfg.HiddenSize,
		SourceSHA256: hex.EncodeToString(h.Sum(nil)), Tokenizer: tok}, standin.Resample(payload, bits/16))
}

// tokenize: llama-tokenize -m M -f TEXT [--ids] [--no-bos] [--no-escape]
// [--log-disable]. The stand-in's vocabulary is the bytes: each byte of
// the text is token 3 + its value, after the BOS when the GGUF's
// tokenizer adds one and --no-bos is not given; a GGUF without a
// tokenizer is refused, as llama.cpp refuses one without a vocabulary.
func tokenize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llama-tokenize", flag.ContinueOnError)
	model := fs.String("m", "", "")
	file := fs.String("f", "", "")
	ids := fs.Bool("ids", false, "")
	noBOS := fs.Bool("no-bos", false, "")
	fs.Bool("no-escape", false, "")
	fs.Bool("log-disable", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *file == "" {
		return errors.New("usage: llama-tokenize -m MODEL -f FILE [--ids] [--no-bos]")
	}
	h, _, err := readGGUF(*model)
	if err != nil {
		return err
	}
	if h.Tokenizer == nil {
		return fmt.Errorf("%s has no vocabulary (no tokenizer.ggml.model): cannot tokenize", *model)
	}
	text, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	var toks []int
	if bos, ok := h.Tokenizer["tokenizer.ggml.bos_token_id"].(float64); ok && h.Tokenizer["tokenizer.ggml.add_bos_token"] == true && !*noBOS {
		toks = append(toks, int(bos))
	}
	for _, b := range text {
		toks = append(toks, 3+int(b))
	}
	if !*ids {
		for _, t := range toks {
			piece := ""
			if t >= 3 {
				piece = string([]byte{byte(t - 3)})
			}
			fmt.Fprintf(stdout, "%6d -> '%s'\n", t, piece)
		}
		return nil
	}
	words := make([]string, len(toks))
	for i, t := range toks {
		words[i] = fmt.Sprint(t)
	}
	fmt.Fprintf(stdout, "[%s]\n", strings.Join(words, ", "))
	return nil
}

// quantize: llama-quantize [--imatrix F] IN OUT TYPE [THREADS]
func quantize(args []string, stdout, stderr io.Writer) error {
	var imatrixFile string
	if len(args) >= 2 && args[0] == "--imatrix" {
		imatrixFile, args = args[1], args[2:]
	}
	if len(args) < 3 {
		return errors.New("usage: llama-quantize [--imatrix F] IN OUT TYPE [THREADS]")
	}
	in, out, typ := args[0], args[1], strings.ToUpper(args[2])
	bits, ok := typeBits[typ]
	if !ok {
		return fmt.Errorf("invalid ftype %s", args[2])
	}
	h, payload, err := readGGUF(in)
	if err != nil {
		return err
	}
	if imatrixFile != "" {
		im, err := os.ReadFile(imatrixFile)
		if err != nil {
			return fmt.Errorf("imatrix: %w", err)
		}
		sum := sha256.Sum256(im)
		h.Imatrix = hex.EncodeToString(sum[:])
	}
	fmt.Fprintf(stdout, "main: quantizing '%s' to '%s' as %s\n", in, out, typ)
	// Like llama.cpp: K-quants need rows divisible by 256.
	fallbacks := 0
	if strings.Contains(typ, "_K") && h.HiddenSize%256 != 0 {
		for i := 0; i < 3; i++ {
			fmt.Fprintf(stdout, "warning: blk.%d.attn_q.weight - ncols %6d not divisible by 256 (required for type    q4_K) -> falling back to    q5_0\n", i, h.HiddenSize)
			fallbacks++
		}
		fmt.Fprintf(stdout, "llama_model_quantize_impl: WARNING: %d of %d tensor(s) required fallback quantization\n", fallbacks, 10)
	}
	newPayload := standin.Resample(payload, bits/h.Bits)
	fmt.Fprintf(stdout, "llama_model_quantize_impl: model size  = %8.2f MB\nllama_model_quantize_impl: quant size  = %8.2f MB\n",
		float64(len(payload))/1e6, float64(len(newPayload))/1e6)
	h.Type, h.Bits = typ, bits
	return writeGGUF(out, h, newPayload)
}

// baseRecord is what the stand-in saves as "KL-divergence base logits".
type baseRecord struct {
	PPL     float64 `json:"ppl"`
	Chunks  int     `json:"chunks"`
	Context int     `json:"context"`
	TextSHA string  `json:"text_sha256"`
	Bits    float64 `json:"bits"`
}

// perplexity: llama-perplexity -m M [-f TEXT] -c N [-b N] [--chunks K]
// [--kl-divergence-base F [--kl-divergence]]
func perplexity(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("perplexity", flag.ContinueOnError)
	model := fs.String("m", "", "")
	textFile := fs.String("f", "", "")
	nctx := fs.Int("c", 512, "")
	fs.Int("b", 512, "")
	fs.Int("t", 1, "")
	chunks := fs.Int("chunks", -1, "")
	klBase := fs.String("kl-divergence-base", "", "")
	kl := fs.Bool("kl-divergence", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	h, _, err := readGGUF(*model)
	if err != nil {
		return err
	}
	if *kl {
		b, err := os.ReadFile(*klBase)
		if err != nil {
			return fmt.Errorf("kl-divergence base: %w", err)
		}
		var base baseRecord
		if err := json.Unmarshal(b, &base); err != nil {
			return fmt.Errorf("kl-divergence base: %w", err)
		}
		d := standin.Drift(h.Bits) - standin.Drift(base.Bits)
		if h.Imatrix != "" {
			d *= 0.8
		}
		ppl := base.PPL + d
		// What llama-perplexity prints in this mode: no final estimate and
		// no chunk count, a statistics block instead.
		fmt.Fprintf(stdout, "====== Perplexity statistics ======\n")
		fmt.Fprintf(stdout, "Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl, 0.05)
		fmt.Fprintf(stdout, "Mean PPL(base)                : %10.6f ± %10.6f\n", base.PPL, 0.05)
		fmt.Fprintf(stdout, "Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n\n", d, 0.01+math.Abs(d)/10)
		fmt.Fprintf(stdout, "====== KL divergence statistics ======\nMean    KLD:   %.6f ±   0.000100\n", d/10)
		fmt.Fprintf(stdout, "====== Token probability statistics ======\nSame top p: %.3f ± 0.100 %%\n", 100*(1-d/5))
		return nil
	}
	text, err := os.ReadFile(*textFile)
	if err != nil {
		return err
	}
	if *nctx < 1 {
		return fmt.Errorf("the stand-in's -c must be at least 1, not %d", *nctx)
	}
	ppl, tokens := standin.TextPerplexity(text)
	if tokens < 2**nctx {
		return fmt.Errorf("you need at least %d tokens to evaluate perplexity with a context of %d; the text has %d", 2**nctx, *nctx, tokens)
	}
	n := tokens / *nctx
	if *chunks > 0 && *chunks < n {
		n = *chunks
	}
	ppl += standin.Drift(h.Bits)
	fmt.Fprintf(stdout, "perplexity: calculating perplexity over %d chunks, n_ctx=%d, batch_size=%d, n_seq=1\n", n, *nctx, *nctx)
	// The running estimate after each chunk, on one line, as the real
	// tool prints it (edgepipe reads its progress from it).
	for i := 1; i <= n; i++ {
		fmt.Fprintf(stdout, "[%d]%.4f,", i, ppl)
	}
	fmt.Fprintf(stdout, "\nFinal estimate: PPL = %.4f +/- 0.05000\n", ppl)
	if *klBase != "" {
		sum := sha256.Sum256(text)
		rec, _ := json.Marshal(baseRecord{PPL: ppl, Chunks: n, Context: *nctx, TextSHA: hex.EncodeToString(sum[:]), Bits: h.Bits})
		return os.WriteFile(*klBase, rec, 0o644)
	}
	return nil
}

// imatrix: llama-imatrix -m M -f TEXT -o OUT [...]
func imatrix(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("imatrix", flag.ContinueOnError)
	model := fs.String("m", "", "")
	textFile := fs.String("f", "", "")
	out := fs.String("o", "", "")
	fs.Int("c", 512, "")
	fs.Int("b", 512, "")
	fs.Int("t", 1, "")
	fs.Int("chunks", -1, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	h, payload, err := readGGUF(*model)
	if err != nil {
		return err
	}
	text, err := os.ReadFile(*textFile)
	if err != nil {
		return err
	}
	sum := sha256.New()
	sum.Write([]byte(h.SourceSHA256))
	sum.Write(payload[:min(len(payload), 4096)])
	sum.Write(text)
	return os.WriteFile(*out, []byte("imatrix "+hex.EncodeToString(sum.Sum(nil))+"\n"), 0o644)
}
