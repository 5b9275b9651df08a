package steps

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// hfPerplexity scores an unconverted Hugging Face checkpoint through
// transformers with llama-perplexity's chunking (hf_perplexity.py). It is
// the baseline of every format that is not scored by llama.cpp (ONNX, QNN,
// GPTQ, AWQ): those formats' scorers use the same tokens and chunks, so the
// two numbers compare.
type hfPerplexity struct{}

func init() { Register(hfPerplexity{}) }

// toolchain.ToolHFPPL is the transformers perplexity script.

func (hfPerplexity) Name() string          { return "hf-perplexity" }
func (hfPerplexity) Version() int          { return 1 }
func (hfPerplexity) Tools(Params) []string { return []string{toolchain.ToolHFPPL} }
func (hfPerplexity) Resources(Params) Resources {
	// fp32 weights (0.5 GB for 135M parameters) plus torch and one chunk's
	// logits; torch uses every core it is given.
	return Resources{Cores: 2, MemoryMB: 3072}
}

func (hfPerplexity) Run(ctx context.Context, sc *Context) error {
	src, err := sc.Input("fetch")
	if err != nil {
		return err
	}
	res, err := RunTransformersPerplexity(ctx, sc, toolchain.ToolHFPPL, src.Dir)
	if err != nil {
		return err
	}
	res.Record(sc.Result)
	sc.Result.SetFact("backend", "transformers")
	return nil
}

// TransformersPPL is what the transformers perplexity scripts print.
type TransformersPPL struct {
	PPL    float64 `json:"ppl"`
	Chunks int     `json:"chunks"`
	Ctx    int     `json:"ctx"`
	Scored int     `json:"scored"`
}

func (r TransformersPPL) Record(res *Result) {
	res.SetMetric("ppl", r.PPL)
	res.SetMetric("eval_tokens", float64(r.Scored))
	res.SetMetric("chunks", float64(r.Chunks))
	res.SetMetric("context", float64(r.Ctx))
}

// RunTransformersPerplexity runs a perplexity script (hf_perplexity.py or
// one that wraps it in another toolchain) on modelDir with the step's
// context, chunks and eval text, and reads its JSON result line.
func RunTransformersPerplexity(ctx context.Context, sc *Context, tool, modelDir string) (TransformersPPL, error) {
	var res TransformersPPL
	text, err := sc.Data(sc.Params.String("eval", "builtin:eval"))
	if err != nil {
		return res, err
	}
	args := []string{"--model", modelDir, "--text", text, "--ctx", strconv.Itoa(sc.Params.Int("context", 512))}
	if n := sc.Params.Int("max_chunks", 0); n > 0 {
		args = append(args, "--chunks", strconv.Itoa(n))
	}
	if err := sc.RunTool(ctx, tool, args...); err != nil {
		return res, err
	}
	if err := ReadJSONLine(sc.LogPath, &res); err != nil {
		return res, fmt.Errorf("%s: %w", tool, err)
	}
	if !(res.PPL > 0) {
		return res, fmt.Errorf("%s reported perplexity %v: the model produces no usable probabilities (see %s)", tool, res.PPL, sc.LogPath)
	}
	return res, nil
}

// ReadJSONLine decodes the last line of a step log that is a JSON object:
// the helper scripts print their results as one JSON line on stdout, after
// whatever the libraries they call have logged.
func ReadJSONLine(logPath string, v any) error {
	f, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	var last []byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) > 1 && line[0] == '{' && line[len(line)-1] == '}' && json.Valid(line) {
			last = append(last[:0], line...)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", logPath, err)
	}
	if last == nil {
		return fmt.Errorf("no JSON result line in its output (see %s)", logPath)
	}
	return json.Unmarshal(last, v)
}
