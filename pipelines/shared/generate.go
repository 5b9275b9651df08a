package shared

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps"
)

// generateReference is the unconverted model's greedy generation from the
// built-in chat prompts (generate_reference.py, transformers in the llama
// toolchain): the reference every artifact's decode check compares with,
// one per recipe (per max_new_tokens), shared by its targets.
type generateReference struct{}

// GenerateReference is the kind of the reference generation.
var GenerateReference steps.Kind = generateReference{}

func init() { steps.Register(generateReference{}) }

// ReferenceFile is the reference the step writes (and its output role).
const ReferenceFile = "reference.json"

// GenerateParams are a generate-reference step's.
type GenerateParams struct {
	// MaxNewTokens caps each sequence (the original may stop earlier at
	// its end-of-sequence token).
	MaxNewTokens int `json:"max_new_tokens"`
}

func (generateReference) Name() string       { return "generate-reference" }
func (generateReference) Version() int       { return 1 }
func (generateReference) NewParams() any     { return &GenerateParams{} }
func (generateReference) Tools(any) []string { return []string{toolchain.ToolGenerateReference} }
func (generateReference) Resources(any) steps.Resources {
	// The fp32 model, its KV cache and one step's logits: hf-perplexity's
	// weight, whose script loads the model the same way.
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 491, ModelFactor: 2.37}
}

func (generateReference) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(Fetch)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[GenerateParams](sc.Params)
	if p.MaxNewTokens < 1 {
		return fmt.Errorf("generate-reference: max_new_tokens must be at least 1, not %d (quality.generation.max_new_tokens)", p.MaxNewTokens)
	}
	prompts, err := sc.Data(steps.DataPrompts)
	if err != nil {
		return err
	}
	// The eval text is where a sliding-window model's window passage
	// comes from; other models never read it.
	text, err := sc.Data(steps.DataEval)
	if err != nil {
		return err
	}
	if err := sc.RunTool(ctx, toolchain.ToolGenerateReference, "--model", src.Dir, "--prompts", prompts, "--out", sc.Out,
		"--max-new-tokens", strconv.Itoa(p.MaxNewTokens), "--text", text, "--threads", strconv.Itoa(sc.NumThreads())); err != nil {
		return err
	}
	var rep report.GenerateReference
	if err := steps.ReadReport(toolchain.ToolGenerateReference, sc.LogPath, &rep); err != nil {
		return err
	}
	return RecordReference(sc.Result, sc.Out, rep, p.MaxNewTokens)
}

// RecordReference checks generate_reference.py's report against the file
// it wrote in out and the step's settings, and records what the original
// generated.
func RecordReference(res *steps.Result, out string, rep report.GenerateReference, maxNew int) error {
	tool := toolchain.ToolGenerateReference
	if rep.Reference != ReferenceFile {
		return fmt.Errorf("%s reported its reference as %q, not %s", tool, rep.Reference, ReferenceFile)
	}
	if _, err := os.Stat(filepath.Join(out, ReferenceFile)); err != nil {
		return fmt.Errorf("%s wrote no %s: %w", tool, ReferenceFile, err)
	}
	if rep.Sequences < 1 || rep.MaxNewTokens != maxNew || rep.GeneratedTokens < rep.Sequences {
		return fmt.Errorf("%s generated %d tokens in %d sequences at most %d each, asked for at most %d each: not a reference to compare with",
			tool, rep.GeneratedTokens, rep.Sequences, rep.MaxNewTokens, maxNew)
	}
	res.SetFile("reference", ReferenceFile)
	res.SetMetric("sequences", float64(rep.Sequences))
	res.SetMetric("generated_tokens", float64(rep.GeneratedTokens))
	res.SetMetric("stopped_at_eos", float64(rep.StoppedAtEOS))
	res.SetMetric("max_new_tokens", float64(rep.MaxNewTokens))
	if rep.ChatTemplate {
		res.SetFact("chat_template", "applied: each prompt rendered with the tokenizer's chat template and its generation prompt")
	} else {
		res.SetFact("chat_template", "skipped: the tokenizer has no chat template, so each prompt was given as plain text")
	}
	if w := rep.SlidingWindow; w != nil {
		res.SetMetric("sliding_window", float64(*w))
		switch {
		case rep.CrossesWindow != nil && *rep.CrossesWindow:
			res.SetFact("sliding_window", fmt.Sprintf("%d tokens: the window sequence's decode crosses it", *w))
		default:
			res.SetFact("sliding_window", fmt.Sprintf("%d tokens, but no sequence's decode crosses it (the original stopped at EOS first, or max_new_tokens is too small): the decode checks do not cover the window", *w))
		}
	}
	res.SetVersion("transformers", rep.Transformers)
	res.SetVersion("torch", rep.Torch)
	return nil
}
