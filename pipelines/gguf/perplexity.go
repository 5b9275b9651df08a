package gguf

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

// perplexity scores a GGUF model on the evaluation text with
// llama-perplexity. The baseline (the unconverted F16 model) also saves its
// logits so every converted model is compared on exactly the same tokens,
// with KL divergence and top-1 agreement besides perplexity.
type perplexity struct{}

// PerplexityParams are a llama-perplexity step's: how it scores, and
// whether it is the baseline (which saves its logits) or a converted model
// (scored against them).
type PerplexityParams struct {
	steps.Eval
	Role string `json:"role"`
}

// Roles of a perplexity step.
const (
	RoleBaseline  = "baseline"
	RoleConverted = "converted"
)

func (perplexity) Name() string       { return "perplexity" }
func (perplexity) Version() int       { return 4 }
func (perplexity) NewParams() any     { return &PerplexityParams{} }
func (perplexity) Tools(any) []string { return []string{toolchain.ToolPerplexity} }
func (perplexity) Resources(any) steps.Resources {
	// The logits over the vocabulary (the largest tensor's rows) weigh
	// more than the model, which llama.cpp maps from the GGUF (page cache
	// the kernel can drop). Fitted to short evaluations: a longer one
	// weighs more until its own peak is recorded
	// (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 270, TensorFactor: 1.22, OwnWaitPolicy: llamaCppWaitPolicy}
}

const klBaseFile = "logits.kld"

func (perplexity) Run(ctx context.Context, sc *steps.Context) error {
	model, err := modelInput(sc)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[PerplexityParams](sc.Params)
	ctxLen := p.Chunk
	args := []string{"-m", filepath.Join(model.Dir, model.Result.Files["model"]),
		"-c", strconv.Itoa(ctxLen), "-b", strconv.Itoa(ctxLen), "-t", strconv.Itoa(sc.NumThreads())}
	if n := p.MaxChunks; n > 0 {
		args = append(args, "--chunks", strconv.Itoa(n))
	}
	role := p.Role
	var base steps.Input
	switch role {
	case RoleBaseline:
		text, err := sc.Data(steps.DataEval)
		if err != nil {
			return err
		}
		args = append(args, "-f", text, "--kl-divergence-base", filepath.Join(sc.Out, klBaseFile))
	case RoleConverted:
		base, err = sc.Input(perplexity{})
		if err != nil {
			return err
		}
		// With --kl-divergence the tokens come from the baseline's file, so
		// both models are scored on the same tokens and chunks.
		args = append(args, "--kl-divergence-base", filepath.Join(base.Dir, klBaseFile), "--kl-divergence")
	default:
		return fmt.Errorf("perplexity: role must be baseline or converted, not %q", role)
	}
	if err := sc.RunTool(ctx, toolchain.ToolPerplexity, args...); err != nil {
		return err
	}
	log, err := os.ReadFile(sc.LogPath)
	if err != nil {
		return err
	}
	m, err := ParsePerplexityLog(string(log))
	if err != nil {
		return fmt.Errorf("llama-perplexity: %w (see %s)", err, sc.LogPath)
	}
	res := &steps.Perplexity{PPL: m.PPL, Stderr: m.PPLErr, Context: ctxLen, Backend: "llama.cpp"}
	if m.Chunks == 0 && role == RoleConverted && base.Result.Perplexity != nil {
		// In --kl-divergence mode llama-perplexity reads the baseline's
		// tokens and does not announce the chunk count: it is the baseline's.
		m.Chunks = base.Result.Perplexity.Chunks
	}
	if m.Chunks == 0 {
		return fmt.Errorf("llama-perplexity did not say how many chunks it scored (see %s)", sc.LogPath)
	}
	res.Chunks = m.Chunks
	// llama-perplexity scores the second half of each chunk.
	res.EvalTokens = m.Chunks * (ctxLen - ctxLen/2)
	sc.Result.Perplexity = res
	if role == RoleBaseline {
		sc.Result.SetFile("kl_base", klBaseFile)
		return nil
	}
	if base.Result.Perplexity == nil {
		return fmt.Errorf("the baseline step %s recorded no perplexity", base.StepID)
	}
	res.Baseline = base.Result.Perplexity.PPL
	if !math.IsNaN(m.KLD) {
		kld := m.KLD
		res.KLDivergence = &kld
	}
	if !math.IsNaN(m.SameTop) {
		top := m.SameTop
		res.Top1Agreement = &top
	}
	if !math.IsNaN(m.DeltaSE) {
		// llama.cpp pairs the two models token by token and treats the
		// tokens as independent, as the other families' bootstrap does.
		d := res.PPL - res.Baseline
		lo, hi := d-1.96*m.DeltaSE, d+1.96*m.DeltaSE
		res.DeltaLow, res.DeltaHigh = &lo, &hi
		res.Interval = fmt.Sprintf("llama.cpp's standard error, paired over %d tokens (±1.96)", res.EvalTokens)
	}
	return nil
}

// modelInput finds the input holding a model file (any kind but perplexity).
func modelInput(sc *steps.Context) (steps.Input, error) {
	for _, in := range sc.Inputs {
		if in.Kind != (perplexity{}).Name() && in.Result != nil && in.Result.Files["model"] != "" {
			return in, nil
		}
	}
	return steps.Input{}, fmt.Errorf("step %s needs a step that produced a model", sc.StepID)
}

// PerplexityLog is what llama-perplexity reports.
type PerplexityLog struct {
	PPL, PPLErr float64
	Chunks      int
	KLD         float64 // NaN when not computed
	SameTop     float64 // fraction 0..1, NaN when not computed
	// DeltaSE is the standard error llama.cpp gives PPL(Q)-PPL(base),
	// pairing the two models token by token; NaN when not computed.
	DeltaSE float64
}

var (
	finalPPL  = regexp.MustCompile(`Final estimate: PPL = ([0-9.eE+-]+|nan|inf)(?: \+/- ([0-9.eE+-]+))?`)
	chunksRe  = regexp.MustCompile(`calculating perplexity over (\d+) chunks`)
	meanKLD   = regexp.MustCompile(`Mean\s+KLD:\s+([0-9.eE+-]+)`)
	sameTopRe = regexp.MustCompile(`Same top p:\s+([0-9.eE+-]+)\s*±?`)
	// In --kl-divergence mode the final estimate line is replaced by a
	// statistics block whose first line is the converted model's PPL.
	meanPPLQ = regexp.MustCompile(`Mean PPL\(Q\)\s*:\s+([0-9.eE+-]+)\s*±\s*([0-9.eE+-]+)`)
	deltaPPL = regexp.MustCompile(`Mean PPL\(Q\)-PPL\(base\)\s*:\s+([0-9.eE+-]+)\s*±\s*([0-9.eE+-]+)`)
)

// ParsePerplexityLog extracts the numbers from llama-perplexity's output.
func ParsePerplexityLog(log string) (PerplexityLog, error) {
	out := PerplexityLog{KLD: math.NaN(), SameTop: math.NaN(), DeltaSE: math.NaN()}
	if m := finalPPL.FindStringSubmatch(log); m != nil {
		out.PPL, _ = strconv.ParseFloat(m[1], 64)
		if m[2] != "" {
			out.PPLErr, _ = strconv.ParseFloat(m[2], 64)
		}
	} else if m := meanPPLQ.FindStringSubmatch(log); m != nil {
		out.PPL, _ = strconv.ParseFloat(m[1], 64)
		out.PPLErr, _ = strconv.ParseFloat(m[2], 64)
	} else {
		return out, fmt.Errorf("no final perplexity in its output")
	}
	if math.IsNaN(out.PPL) || math.IsInf(out.PPL, 0) || out.PPL <= 0 {
		return out, fmt.Errorf("perplexity is %v: the model produces no usable probabilities", out.PPL)
	}
	if m := chunksRe.FindStringSubmatch(log); m != nil {
		out.Chunks, _ = strconv.Atoi(m[1])
	}
	if m := deltaPPL.FindStringSubmatch(log); m != nil {
		out.DeltaSE, _ = strconv.ParseFloat(m[2], 64)
	}
	if m := meanKLD.FindStringSubmatch(log); m != nil {
		out.KLD, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := sameTopRe.FindStringSubmatch(log); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		out.SameTop = v / 100
	}
	return out, nil
}
