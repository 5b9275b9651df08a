// Package standin holds test stand-ins for the conversion tools that the
// fast test tier and the benchmarks cannot run (no Python, no llama.cpp
// build). Each stand-in reads its real inputs and derives its outputs and
// numbers from them, so digests and metrics move when inputs move; and each
// says it is a stand-in when asked for its version, which manifests record.
//
// The numbers are NOT measurements of any model: perplexity here is a
// function of the evaluation text and the quantization's bit width, chosen
// so gates can be exercised (Q2_K drifts past 2.0, Q8_0 stays excellent).
package standin

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Tools are the stand-ins by the tool name they replace.
var Tools = map[string]func(args []string, stdout, stderr io.Writer) error{}

// Main runs the stand-in named name and returns its exit code.
func Main(name string, args []string) int {
	if name == "standin" && len(args) == 2 && args[0] == "link" {
		if err := Link(args[1]); err != nil {
			fmt.Fprintf(os.Stderr, "standin: %v\n", err)
			return 1
		}
		return 0
	}
	f, ok := Tools[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "standin: no stand-in for %q\n", name)
		return 2
	}
	if len(args) == 1 && args[0] == "--version" {
		fmt.Printf("edgepipe stand-in for %s (not the real tool)\n", name)
		return 0
	}
	slowDown(name)
	if err := f(args, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "%s (stand-in): %v\n", name, err)
		return 1
	}
	return 0
}

// TextPerplexity derives a stable pseudo-perplexity from the text: more
// varied text scores higher.
func TextPerplexity(text []byte) (ppl float64, tokens int) {
	words := strings.Fields(string(text))
	distinct := map[string]bool{}
	for _, w := range words {
		distinct[strings.ToLower(w)] = true
	}
	if len(words) == 0 {
		return math.NaN(), 0
	}
	return 6 + 30*float64(len(distinct))/float64(len(words)), len(words)
}

// Drift is how far a type's perplexity moves from F16's: 8 / 2^bits, so
// Q8_0 drifts 0.02, Q4_K_M 0.28, Q2_K 1.3, and "damaged" models more.
func Drift(bits float64) float64 {
	if bits >= 16 {
		return 0
	}
	return 8 / math.Pow(2, bits)
}

// Link makes dir hold a symlink named after every stand-in tool, pointing at
// the standin binary beside them, so a hand-kept list of tool names cannot
// fall behind Tools (it did once: hf_perplexity.py was missing).
func Link(dir string) error {
	for name := range Tools {
		link := filepath.Join(dir, name)
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Symlink("standin", link); err != nil {
			return err
		}
	}
	return nil
}

// Resample keeps a fraction of the payload's bytes, deterministically, so
// a smaller type makes a smaller file derived from the input.
func Resample(p []byte, frac float64) []byte {
	if frac >= 1 {
		return append([]byte(nil), p...)
	}
	n := int(math.Ceil(float64(len(p)) * frac))
	out := make([]byte, n)
	for i := range out {
		out[i] = p[int(float64(i)/frac)%len(p)]
	}
	return out
}

// EvalChunks reads an evaluation text and returns its stand-in perplexity,
// its word count, and how many chunks of nctx "tokens" (words) a scorer would evaluate,
// bounded by chunks when positive, the way llama-perplexity counts them.
func EvalChunks(textFile string, nctx, chunks int) (ppl float64, tokens, n int, err error) {
	if nctx < 1 {
		return 0, 0, 0, fmt.Errorf("--ctx must be at least 1, not %d: it is the number of tokens in a chunk", nctx)
	}
	text, err := os.ReadFile(textFile)
	if err != nil {
		return 0, 0, 0, err
	}
	ppl, tokens = TextPerplexity(text)
	if tokens < 2*nctx {
		return 0, 0, 0, fmt.Errorf("need at least %d tokens for --ctx %d, the text has %d", 2*nctx, nctx, tokens)
	}
	n = tokens / nctx
	if chunks > 0 && chunks < n {
		n = chunks
	}
	return ppl, tokens, n, nil
}

// Args splits positional arguments from "--flag value" pairs.
func Args(args []string) (pos []string, flags map[string]string, err error) {
	flags = map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			pos = append(pos, a)
			continue
		}
		if k, v, ok := strings.Cut(a, "="); ok {
			flags[k] = v
			continue
		}
		if i+1 >= len(args) {
			return nil, nil, fmt.Errorf("%s needs a value", a)
		}
		flags[a] = args[i+1]
		i++
	}
	return pos, flags, nil
}

// ParseFlags parses args with fs, allowing flags after positionals (as
// the real tools' argparse does; flag.Parse alone stops at the first one
// and would leave the later flags at their defaults): the positionals end
// up in fs.Args(), in order, and "--" still ends the flags.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) > 0 {
			pos = append(pos, rest[0])
			rest = rest[1:]
		}
		args = rest
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// CopyCheckpointFiles copies config and tokenizer files (everything but
// weights) from a checkpoint or export folder, as optimum does.
func CopyCheckpointFiles(from, to string) error {
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || strings.HasSuffix(n, ".safetensors") || strings.HasSuffix(n, ".onnx") || n == "result.json" || n == "step.log" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, n))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, n), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func PrintJSON(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// slowDown sleeps first when EDGEPIPE_STANDIN_SLOW=NAME:SECONDS names this
// stand-in: tests that kill a machine or edgepipe mid-step need a step
// that is still running.
func slowDown(name string) {
	tool, secs, ok := strings.Cut(os.Getenv("EDGEPIPE_STANDIN_SLOW"), ":")
	if n, err := strconv.Atoi(secs); ok && err == nil && tool == name {
		time.Sleep(time.Duration(n) * time.Second)
	}
}
