package standin

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func init() {
	Tools["llama-bench"] = llamaBench
	Tools["onnx_bench.py"] = onnxBench
}

// Stand-in timings are not measurements: they are a deterministic function
// of the model file's bytes and size, so a bigger model "decodes" slower,
// another model gives other numbers, and the same model gives the same
// numbers every time (the tests can pin budgets against them).
//
// A token costs a fixed overhead plus the model's bytes at a notional
// 20 GB/s; a prompt token a tenth of that (prompts are batched); each run
// varies by up to +30% by a hash of the model and the run's index.
const (
	standinBytesPerNS  = 20.0 // 20 GB/s
	standinTokenOverNS = 50_000
)

// runTimings returns n timings of base ns, each varied by the model's
// digest, the run's index and salt (which test it is).
func runTimings(sum [32]byte, salt string, base float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		h := sha256.New()
		h.Write(sum[:])
		fmt.Fprintf(h, "%s/%d", salt, i)
		var b [32]byte
		copy(b[:], h.Sum(nil))
		frac := float64(binary.LittleEndian.Uint64(b[:8])%1000) / 1000
		out[i] = float64(int64(base * (1 + 0.3*frac)))
	}
	return out
}

// modelCost reads a model file whole and returns its digest and the
// stand-in cost of one decoded token in ns.
func modelCost(path string) ([32]byte, float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return [32]byte{}, 0, err
	}
	return sha256.Sum256(b), standinTokenOverNS + float64(len(b))/standinBytesPerNS, nil
}

// llamaBench: llama-bench -m MODEL -p P -n N [-d D] -r R [-t T] -o jsonl.
// Like the real tool it prints one JSON line per test: a prompt test when
// P > 0, a generation test when N > 0, each at depth D.
func llamaBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llama-bench", flag.ContinueOnError)
	model := fs.String("m", "", "")
	prompt := fs.Int("p", 512, "")
	gen := fs.Int("n", 128, "")
	depth := fs.Int("d", 0, "")
	reps := fs.Int("r", 5, "")
	threads := fs.Int("t", 4, "")
	output := fs.String("o", "md", "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *output != "jsonl" {
		return fmt.Errorf("the stand-in prints only -o jsonl, not %q", *output)
	}
	if *reps < 1 {
		return errors.New("-r must be at least 1")
	}
	if _, _, err := readGGUF(*model); err != nil {
		return fmt.Errorf("failed to load model '%s': %w", *model, err)
	}
	sum, token, err := modelCost(*model)
	if err != nil {
		return err
	}
	// Attention reads the KV cache: deeper is a little slower.
	depthCost := 1 + float64(*depth)/4096
	type test struct {
		BuildCommit string    `json:"build_commit"`
		ModelFile   string    `json:"model_filename"`
		NThreads    int       `json:"n_threads"`
		NPrompt     int       `json:"n_prompt"`
		NGen        int       `json:"n_gen"`
		NDepth      int       `json:"n_depth"`
		SamplesNS   []float64 `json:"samples_ns"`
	}
	enc := json.NewEncoder(stdout)
	if *prompt > 0 {
		base := token * depthCost * (0.1*float64(*prompt) + 1)
		if err := enc.Encode(test{"stand-in", *model, *threads, *prompt, 0, *depth,
			runTimings(sum, fmt.Sprintf("pp%d@%d", *prompt, *depth), base, *reps)}); err != nil {
			return err
		}
	}
	if *gen > 0 {
		base := token * depthCost * float64(*gen)
		if err := enc.Encode(test{"stand-in", *model, *threads, 0, *gen, *depth,
			runTimings(sum, fmt.Sprintf("tg%d@%d", *gen, *depth), base, *reps)}); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "llama_perf_context_print: stand-in, %d repetitions\n", *reps)
	return nil
}

// onnxBench: onnx_bench.py --onnx MODEL --prompt-tokens P --runs R
// [--threads T]; refuses graphs without a KV cache as the real one does.
func onnxBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("onnx_bench", flag.ContinueOnError)
	model := fs.String("onnx", "", "")
	prompt := fs.Int("prompt-tokens", 128, "")
	runs := fs.Int("runs", 60, "")
	threads := fs.Int("threads", 0, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *prompt < 1 || *runs < 1 {
		return errors.New("--prompt-tokens and --runs must be at least 1")
	}
	h, _, err := readONNX(*model)
	if err != nil {
		return err
	}
	if h.KVLayers == 0 {
		return errors.New("the graph has no past_key_values inputs: per-token decode needs a model exported with a KV cache")
	}
	sum, token, err := modelCost(*model)
	if err != nil {
		return err
	}
	depthCost := 1 + float64(*prompt)/4096
	res := map[string]any{
		"prompt_ns":     runTimings(sum, "prompt", token*(0.1*float64(*prompt)+1), *runs),
		"decode_ns":     runTimings(sum, "decode", token*depthCost, *runs),
		"prompt_tokens": *prompt,
		"threads":       *threads,
		"kv_layers":     h.KVLayers,
		"providers":     []string{"CPUExecutionProvider (stand-in)"},
	}
	fmt.Fprintf(stderr, "onnx_bench (stand-in): %d prompt and %d decode runs\n", *runs, *runs)
	return printJSON(stdout, res)
}
