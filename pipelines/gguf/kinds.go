package gguf

import (
	"bufio"
	"context"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

// llamaCppWaitPolicy keeps OpenMP's default wait policy (threads spin a
// while before sleeping) for the llama.cpp tools instead of the PASSIVE
// that steps.ThreadEnv gives torch. ggml starts an OpenMP parallel region
// per graph, many per evaluation, and PASSIVE puts its threads to sleep
// between them: llama-perplexity --kl-divergence on the demo's Q8_0 (16 x
// 512 tokens, -t 2, idle 2-core machine, three alternating pairs) took
// 31.9-38.1 s with PASSIVE against 28.3-35.5 s without, slower in every
// pair. The scheduler grants these steps only free cores, so the spinning
// takes no core another step holds.
const llamaCppWaitPolicy = true

// ggufConvert runs llama.cpp's convert_hf_to_gguf.py on a Hugging Face
// checkpoint. One F16 GGUF serves every GGUF type of a recipe.
type ggufConvert struct{}

// ggufQuantize runs llama-quantize on the F16 GGUF.
type ggufQuantize struct{}

// imatrix runs llama-imatrix on the calibration text.
type imatrix struct{}

func (ggufConvert) Name() string { return "gguf-convert" }
func (ggufConvert) Version() int { return 1 }

// ConvertParams are a gguf-convert step's.
type ConvertParams struct {
	// OutType is the GGUF type convert_hf_to_gguf.py writes (f16, bf16,
	// q8_0, f32).
	OutType string `json:"outtype"`
}

func (ggufConvert) NewParams() any     { return &ConvertParams{} }
func (ggufConvert) Tools(any) []string { return []string{toolchain.ToolConvertHF} }
func (ggufConvert) Resources(any) steps.Resources {
	// The converter holds the whole model in memory, with f32
	// intermediates: about three times a bf16 checkpoint, plus Python
	// (fitted in docs/results/memory-weights.md).
	return steps.Resources{Cores: 1, MemoryMB: 115, ModelFactor: 1.62}
}

func (ggufConvert) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	outtype := steps.ParamsOf[ConvertParams](sc.Params).OutType
	switch outtype {
	case "f16", "bf16", "q8_0", "f32":
	default:
		return fmt.Errorf("gguf-convert: outtype %q is not one convert_hf_to_gguf.py writes; use f16, bf16, q8_0 or f32", outtype)
	}
	name := "model-" + outtype + ".gguf"
	out := filepath.Join(sc.Out, name)
	if err := sc.RunTool(ctx, toolchain.ToolConvertHF, src.Dir, "--outtype", outtype, "--outfile", out); err != nil {
		return err
	}
	if err := checkGGUF(out); err != nil {
		return err
	}
	sc.Result.SetFile("model", name)
	return nil
}

func (ggufQuantize) Name() string { return "gguf-quantize" }
func (ggufQuantize) Version() int { return 2 }

// QuantizeParams are a gguf-quantize step's.
type QuantizeParams struct {
	// Type is the llama-quantize type (Q4_K_M, Q8_0, ...).
	Type string `json:"type"`
}

func (ggufQuantize) NewParams() any     { return &QuantizeParams{} }
func (ggufQuantize) Tools(any) []string { return []string{toolchain.ToolQuantize} }
func (ggufQuantize) Resources(any) steps.Resources {
	// llama-quantize holds a tensor at a time, so its largest (the
	// embedding, on a large vocabulary) sets the peak
	// (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 16, TensorFactor: 2, OwnWaitPolicy: llamaCppWaitPolicy}
}

func (ggufQuantize) Run(ctx context.Context, sc *steps.Context) error {
	f16, err := sc.Input(ggufConvert{})
	if err != nil {
		return err
	}
	typ := strings.ToUpper(steps.ParamsOf[QuantizeParams](sc.Params).Type)
	if !knownType(typ) {
		return fmt.Errorf("gguf-quantize: unknown type %q", typ)
	}
	in := filepath.Join(f16.Dir, f16.Result.Files["model"])
	name := "model-" + strings.ToLower(typ) + ".gguf"
	out := filepath.Join(sc.Out, name)
	var args []string
	if im, err := sc.Input(imatrix{}); err == nil {
		args = append(args, "--imatrix", filepath.Join(im.Dir, im.Result.Files["imatrix"]))
	}
	// llama-quantize quantizes each row on one thread, so the thread count
	// (the grant) changes how fast, never the bytes written.
	args = append(args, in, out, typ, strconv.Itoa(sc.NumThreads()))
	if err := sc.RunTool(ctx, toolchain.ToolQuantize, args...); err != nil {
		return err
	}
	if err := checkGGUF(out); err != nil {
		return err
	}
	sc.Result.SetFile("model", name)
	if fb := quantizeFallbacks(sc.LogPath); fb != "" {
		sc.Result.SetFact("fallbacks", fb)
	}
	return nil
}

// fallbackLine matches llama-quantize's notes on tensors whose row size
// does not divide the type's block (256 for K-quants), and its summary.
var (
	fallbackLine    = regexp.MustCompile(`required for type\s+(\S+)\)\s*->\s*falling back to\s+(\S+)`)
	fallbackSummary = regexp.MustCompile(`(\d+) of (\d+) tensor\(s\) required fallback quantization`)
)

// quantizeFallbacks summarises what llama-quantize really did with tensors
// whose width does not fit the chosen type's block, from its log: e.g.
// "180 of 272 tensors required fallback quantization; 150 x q4_K->q5_0;
// 30 x q6_K->q8_0".
func quantizeFallbacks(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	counts := map[string]int{}
	summary := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := fallbackLine.FindStringSubmatch(line); m != nil {
			counts[m[1]+"->"+m[2]]++
		} else if m := fallbackSummary.FindStringSubmatch(line); m != nil {
			summary = fmt.Sprintf("%s of %s tensors required fallback quantization", m[1], m[2])
		}
	}
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%d x %s", n, k))
	}
	sort.Strings(parts)
	if summary != "" {
		parts = append([]string{summary}, parts...)
	}
	return strings.Join(parts, "; ")
}

func (imatrix) Name() string { return "imatrix" }
func (imatrix) Version() int { return 1 }

// ImatrixParams are an imatrix step's: the calibration text is cut into
// chunks of Chunk tokens, at most MaxChunks of them (0: all).
type ImatrixParams struct {
	Chunk     int `json:"chunk"`
	MaxChunks int `json:"max_chunks"`
}

func (imatrix) NewParams() any     { return &ImatrixParams{} }
func (imatrix) Tools(any) []string { return []string{toolchain.ToolImatrix} }
func (imatrix) Resources(any) steps.Resources {
	// One model's peak; the split between the fixed part and the model's
	// is assumed (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 600, ModelFactor: 0.5, OwnWaitPolicy: llamaCppWaitPolicy}
}

func (imatrix) Run(ctx context.Context, sc *steps.Context) error {
	f16, err := sc.Input(ggufConvert{})
	if err != nil {
		return err
	}
	p := steps.ParamsOf[ImatrixParams](sc.Params)
	text, err := sc.Data(steps.DataCalibration)
	if err != nil {
		return err
	}
	out := filepath.Join(sc.Out, "imatrix.dat")
	ctxLen := p.Chunk
	args := []string{"-m", filepath.Join(f16.Dir, f16.Result.Files["model"]), "-f", text, "-o", out,
		"-c", fmt.Sprint(ctxLen), "-b", fmt.Sprint(ctxLen), "-t", fmt.Sprint(sc.NumThreads())}
	if n := p.MaxChunks; n > 0 {
		args = append(args, "--chunks", fmt.Sprint(n))
	}
	if err := sc.RunTool(ctx, toolchain.ToolImatrix, args...); err != nil {
		return err
	}
	if _, err := os.Stat(out); err != nil {
		return fmt.Errorf("llama-imatrix exited 0 but wrote no %s", filepath.Base(out))
	}
	sc.Result.SetFile("imatrix", "imatrix.dat")
	return nil
}

// checkGGUF refuses an output that is not a GGUF file, so a tool that exits
// 0 without writing its output never reaches the cache.
func checkGGUF(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("the tool exited 0 but wrote no %s", filepath.Base(path))
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := f.Read(magic); err != nil || string(magic) != "GGUF" {
		return fmt.Errorf("%s is not a GGUF file (magic %q)", filepath.Base(path), magic)
	}
	return nil
}

// knownType reports whether typ is a llama-quantize type of the family's
// table (the formats a recipe may name).
func knownType(typ string) bool {
	for _, t := range ggufTypes {
		if t.name == typ {
			return true
		}
	}
	return false
}
