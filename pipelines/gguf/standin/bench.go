package standin

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/edgepipe/edgepipe/internal/standin"
)

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
	if err := standin.ParseFlags(fs, args); err != nil {
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
	sum, token, err := standin.ModelCost(*model)
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
			standin.RunTimings(sum, fmt.Sprintf("pp%d@%d", *prompt, *depth), base, *reps)}); err != nil {
			return err
		}
	}
	if *gen > 0 {
		base := token * depthCost * float64(*gen)
		if err := enc.Encode(test{"stand-in", *model, *threads, 0, *gen, *depth,
			standin.RunTimings(sum, fmt.Sprintf("tg%d@%d", *gen, *depth), base, *reps)}); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "llama_perf_context_print: stand-in, %d repetitions\n", *reps)
	return nil
}
