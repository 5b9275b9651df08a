package standin

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/onnx/report"
)

// onnxBench: onnx_bench.py --onnx MODEL --prompt-tokens P --runs R
// [--threads T]; refuses graphs without a KV cache as the real one does.
func onnxBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("onnx_bench", flag.ContinueOnError)
	model := fs.String("onnx", "", "")
	prompt := fs.Int("prompt-tokens", 128, "")
	runs := fs.Int("runs", 60, "")
	threads := fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *prompt < 1 || *runs < 1 {
		return errors.New("--prompt-tokens and --runs must be at least 1")
	}
	h, _, err := ReadONNX(*model)
	if err != nil {
		return err
	}
	if h.KVLayers == 0 {
		return errors.New("the graph has no past_key_values inputs: per-token decode needs a model exported with a KV cache")
	}
	sum, token, err := standin.ModelCost(*model)
	if err != nil {
		return err
	}
	depthCost := 1 + float64(*prompt)/4096
	res := report.Bench{
		PromptNS:     standin.RunTimings(sum, "prompt", token*(0.1*float64(*prompt)+1), *runs),
		DecodeNS:     standin.RunTimings(sum, "decode", token*depthCost, *runs),
		PromptTokens: *prompt,
		Threads:      *threads,
		KVLayers:     h.KVLayers,
		Providers:    []string{"CPUExecutionProvider (stand-in)"},
	}
	fmt.Fprintf(stderr, "onnx_bench (stand-in): %d prompt and %d decode runs\n", *runs, *runs)
	return standin.PrintJSON(stdout, res)
}
