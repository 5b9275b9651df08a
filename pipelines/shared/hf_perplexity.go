package shared

import (
	"os"
	"path/filepath"

	"context"
	"fmt"
	"github.com/edgepipe/edgepipe/internal/pplstat"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps"
	"math"
	"strconv"

	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// hfPerplexity scores an unconverted Hugging Face checkpoint through
// transformers with llama-perplexity's chunking (hf_perplexity.py). It is
// the baseline of every format that is not scored by llama.cpp (ONNX, QNN,
// GPTQ, AWQ): those formats' scorers use the same tokens and chunks, so the
// two numbers compare.
type hfPerplexity struct{}

// HFPerplexity is the kind of the transformers baseline.
var HFPerplexity steps.Kind = hfPerplexity{}

func init() { steps.Register(hfPerplexity{}) }

func (hfPerplexity) Name() string       { return "hf-perplexity" }
func (hfPerplexity) Version() int       { return 2 }
func (hfPerplexity) NewParams() any     { return &steps.Eval{} }
func (hfPerplexity) Tools(any) []string { return []string{toolchain.ToolHFPPL} }
func (hfPerplexity) Resources(any) steps.Resources {
	// fp32 weights (0.5 GB for 135M parameters) plus torch and one chunk's
	// logits; torch uses every core it is given.
	// Fitted to both built-in models' peaks (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 491, ModelFactor: 2.37}
}

func (hfPerplexity) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(Fetch)
	if err != nil {
		return err
	}
	// The baseline keeps every token's score and its top tokens: the
	// converted models' intervals and KL divergences are taken against
	// them.
	res, err := RunTransformersPerplexity(ctx, sc, *steps.ParamsOf[steps.Eval](sc.Params), toolchain.ToolHFPPL, src.Dir,
		"--scores-out", sc.Out, "--keep-topk")
	if err != nil {
		return err
	}
	sc.Result.Perplexity = TransformersPerplexity(res, "transformers")
	return nil
}

// TransformersPerplexity is a perplexity script's report as a step
// records it.
func TransformersPerplexity(r report.Perplexity, backend string) *steps.Perplexity {
	return &steps.Perplexity{PPL: r.PPL, EvalTokens: r.Scored, Chunks: r.Chunks, Context: r.Ctx, Backend: backend,
		KLDivergence: r.KLDivergence, Top1Agreement: r.Top1Agreement}
}

// Interval gives p (a converted model's perplexity against base, the
// baseline step) the 95% interval of its delta, from the per-token scores
// both steps wrote (scores.nll in base's folder and in out). The baseline's
// file must be there; a converted model that wrote none gets no interval.
func Interval(base steps.Input, out string, p *steps.Perplexity) error {
	convPath := filepath.Join(out, pplstat.NLLFile)
	if _, err := os.Stat(convPath); err != nil {
		return nil
	}
	b, err := pplstat.ReadNLL(filepath.Join(base.Dir, pplstat.NLLFile))
	if err != nil {
		return fmt.Errorf("the baseline step %s kept no per-token scores to pair with: %w", base.StepID, err)
	}
	c, err := pplstat.ReadNLL(convPath)
	if err != nil {
		return err
	}
	iv, err := pplstat.PairedDelta(b, c)
	if err != nil {
		return fmt.Errorf("%w (baseline %s)", err, base.StepID)
	}
	// The interval is around the delta the scores give; the recorded
	// perplexities are the helpers' own sums, equal to rounding.
	p.DeltaLow, p.DeltaHigh = &iv.Low, &iv.High
	p.Interval = fmt.Sprintf("paired bootstrap over %d tokens (%d resamples)", iv.Tokens, pplstat.Resamples)
	return nil
}

// RunTransformersPerplexity runs a perplexity script (hf_perplexity.py or
// one that wraps it in another toolchain) on modelDir with ev's chunks
// and the step's evaluation text, and reads its JSON result line.
func RunTransformersPerplexity(ctx context.Context, sc *steps.Context, ev steps.Eval, tool, modelDir string, extra ...string) (report.Perplexity, error) {
	var res report.Perplexity
	text, err := sc.Data(steps.DataEval)
	if err != nil {
		return res, err
	}
	args := []string{"--model", modelDir, "--text", text, "--ctx", strconv.Itoa(ev.Chunk)}
	if n := ev.MaxChunks; n > 0 {
		args = append(args, "--chunks", strconv.Itoa(n))
	}
	if err := sc.RunTool(ctx, tool, append(args, extra...)...); err != nil {
		return res, err
	}
	if err := steps.ReadReport(tool, sc.LogPath, &res); err != nil {
		return res, err
	}
	if !(res.PPL > 0) {
		return res, fmt.Errorf("%s reported perplexity %v: the model produces no usable probabilities (see %s)", tool, res.PPL, sc.LogPath)
	}
	return res, nil
}

// Scored is what a quality script printed for the converted model it
// scored: its perplexity, the tokens it scored, in how many chunks of how
// many tokens.
type Scored struct {
	PPL                 float64
	Tokens, Chunks, Ctx int
	// KLDivergence and Top1Agreement compare the model with the
	// baseline's top tokens (nil when the helper did not).
	KLDivergence, Top1Agreement *float64
	// Out is the step's output folder, where the helper left its
	// per-token scores (scores.nll) for the delta's interval.
	Out string
}

// AgainstBaseline turns a converted model's score into the gate's
// perplexity against the baseline step base. It refuses what cannot be
// gated: a perplexity that is not a finite positive number (the model
// gives no usable probabilities), a baseline that recorded none, and a
// baseline that scored other chunks, since only the same chunks compare.
func AgainstBaseline(base steps.Input, tool, logPath string, s Scored, backend string) (*steps.Perplexity, error) {
	if !(s.PPL > 0) || math.IsInf(s.PPL, 0) {
		return nil, fmt.Errorf("%s reported perplexity %v: the model produces no usable probabilities (see %s)", tool, s.PPL, logPath)
	}
	bpp := base.Result.Perplexity
	if bpp == nil {
		return nil, fmt.Errorf("the baseline step %s recorded no perplexity", base.StepID)
	}
	if bpp.Chunks != s.Chunks || bpp.Context != s.Ctx {
		return nil, fmt.Errorf("%s: the baseline %s scored %d chunks of %d tokens, this model %d of %d: they do not compare",
			tool, base.StepID, bpp.Chunks, bpp.Context, s.Chunks, s.Ctx)
	}
	p := &steps.Perplexity{PPL: s.PPL, Baseline: bpp.PPL, EvalTokens: s.Tokens, Chunks: s.Chunks, Context: s.Ctx, Backend: backend,
		KLDivergence: s.KLDivergence, Top1Agreement: s.Top1Agreement}
	if s.Out != "" {
		if err := Interval(base, s.Out, p); err != nil {
			return nil, fmt.Errorf("%s: %w", tool, err)
		}
	}
	return p, nil
}
