package llmcompressor

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/pipelines/llmcompressor/report"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// llmcQuantize quantizes a Hugging Face checkpoint's Linear weights to INT4
// (W4A16: GPTQ or AWQ) with llmcompressor's oneshot on the CPU, and writes
// the compressed-tensors checkpoint vLLM loads.
type llmcQuantize struct{}

// llmcPerplexity scores that checkpoint through transformers, with the same
// script, tokens and chunks as the hf-perplexity baseline.
type llmcPerplexity struct{}

// Tools of the llmcompressor toolchain.
const (
	ToolLLMCQuantize   = "llmc_quantize.py"
	ToolLLMCPerplexity = "llmc_perplexity.py"
)

// Defaults of llmc-quantize. Calibration is kept small because it runs on
// the CPU: 32 samples of 512 tokens is llmcompressor's smallest documented
// setting scaled down, and enough for a 135M model's Hessians.
const (
	DefaultCalibrationSamples = 32
	DefaultCalibrationSeqLen  = 512
	// DefaultAWQGrid is AWQModifier's own default number of candidate
	// scales per layer; the grid search dominates AWQ's time on a CPU.
	DefaultAWQGrid = 20
)

// groupSizeCandidates are tried largest first when a recipe sets none:
// 128 is what vLLM's INT4 kernels are tuned for, the smaller ones fit
// models whose widths are not multiples of 128 (SmolLM2-135M: 576).
var groupSizeCandidates = []int{128, 64, 32}

func (llmcQuantize) Name() string { return "llmc-quantize" }
func (llmcQuantize) Version() int { return 3 }

// QuantizeParams are an llmc-quantize step's.
type QuantizeParams struct {
	Scheme string `json:"scheme"` // gptq or awq
	// GroupSize is the input columns per scale; 0 asks for the largest of
	// 128, 64 and 32 that divides the model's widths (known only once the
	// model is fetched).
	GroupSize int `json:"group_size"`
	Samples   int `json:"num_calibration_samples"`
	SeqLen    int `json:"max_seq_length"`
	// NGrid is AWQ's candidate scales per layer (0 for GPTQ).
	NGrid int `json:"n_grid,omitempty"`
	// Symmetric drops the zero points (false: one per group).
	Symmetric bool `json:"symmetric"`
	// Observer picks each group's range: minmax or mse.
	Observer string `json:"observer"`
	// ActOrder is GPTQ's activation ordering: static, group or none ("" for
	// AWQ rounded to nearest).
	ActOrder string `json:"actorder,omitempty"`
	// Rounding is how AWQ's rescaled weights are rounded: gptq or rtn ("" for GPTQ).
	Rounding string `json:"rounding,omitempty"`
	// VDownBits is the value and down projections' width (4 or 8); 0
	// means 4, so checkpoints made before the option keep their keys.
	VDownBits int `json:"v_down_bits,omitempty"`
}

// DefaultVDownBits is the value and down projections' width when a target
// sets none: 8, as onnx-int4 and coreml-int4 do.
const DefaultVDownBits = 8

// DefaultAWQRounding is how an AWQ target's rescaled weights are rounded
// when it sets none. llmcompressor 0.14 made AWQ a transform of its own
// (modifiers.transform.awq), to be followed by any quantization modifier;
// GPTQ's error feedback after it is the strongest the tool offers. Round
// to nearest after AWQ measured +2.30 on the built-in model (group 32),
// over the default gate: integer zero points cannot hold the float
// minimums of its Q4_1-rounded weights, and only error feedback makes up
// for that (GPTQ alone: +1.75).
const DefaultAWQRounding = "gptq"

// DefaultActOrder is GPTQ's column order when a target sets none.
const DefaultActOrder = "static"

// DefaultObserver is how a target's groups get their ranges when it sets
// none, by how the weights are rounded. GPTQ's rounding (GPTQ itself, or
// after AWQ) searches a clipped range (mse): its error feedback works from
// the rounding error, and on the built-in model min/max ranges left +2.49
// where mse gives +1.75 (group 32, static order). Round to nearest after
// AWQ, whose scales already protect the salient channels, did worse with
// mse (+2.63 against +2.30 with min/max).
func DefaultObserver(scheme, rounding string) string {
	if scheme == "gptq" || rounding == "gptq" {
		return "mse"
	}
	return "minmax"
}

// gptqRounding reports whether GPTQ rounds the weights (GPTQ itself, or after AWQ).
func (p *QuantizeParams) gptqRounding() bool { return p.Scheme == "gptq" || p.Rounding == "gptq" }

// check refuses parameters the script cannot take: the planner writes
// every value, so a missing one is a plan built wrongly.
func (p *QuantizeParams) check() error {
	switch {
	case p.Scheme != "gptq" && p.Scheme != "awq":
		return fmt.Errorf("llmc-quantize: scheme must be gptq or awq, not %q", p.Scheme)
	case p.Samples <= 0 || p.SeqLen < 8:
		return fmt.Errorf("llmc-quantize: num_calibration_samples must be positive and max_seq_length at least 8 (got %d and %d)", p.Samples, p.SeqLen)
	case p.Scheme == "awq" && p.NGrid < 3:
		return fmt.Errorf("llmc-quantize: n_grid must be at least 3, not %d (llmcompressor's duo-scaling grid divides by n_grid - 2)", p.NGrid)
	case p.Observer != "minmax" && p.Observer != "mse":
		return fmt.Errorf("llmc-quantize: observer must be minmax or mse, not %q", p.Observer)
	case p.Scheme == "awq" && p.Rounding != "gptq" && p.Rounding != "rtn":
		return fmt.Errorf("llmc-quantize: rounding must be gptq or rtn, not %q", p.Rounding)
	case p.VDownBits != 0 && p.VDownBits != 4 && p.VDownBits != 8:
		return fmt.Errorf("llmc-quantize: v_down_bits must be 4 or 8, not %d", p.VDownBits)
	case p.gptqRounding() && p.ActOrder != "static" && p.ActOrder != "group" && p.ActOrder != "none":
		return fmt.Errorf("llmc-quantize: actorder must be static, group or none, not %q", p.ActOrder)
	}
	return nil
}

func (llmcQuantize) NewParams() any     { return &QuantizeParams{} }
func (llmcQuantize) Tools(any) []string { return []string{ToolLLMCQuantize} }
func (llmcQuantize) Resources(any) steps.Resources {
	// One or two cores, as granted: two torch threads were 18x slower per
	// layer only while libgomp spun at its barriers with the threads not
	// each on a core; the executor sets OMP_WAIT_POLICY=PASSIVE (see
	// steps.ThreadEnv), and then two threads beat one. An fp32 copy of the
	// model, calibration activations and per-layer Hessians, plus torch
	// itself; the method's settings move the peak more than the model's
	// size does (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 2200, ModelFactor: 0.5}
}

func (llmcQuantize) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[QuantizeParams](sc.Params)
	if err := p.check(); err != nil {
		return err
	}
	scheme := p.Scheme
	widths, err := LinearWidths(filepath.Join(src.Dir, "config.json"))
	if err != nil {
		return err
	}
	group, err := ChooseGroupSize(p.GroupSize, widths)
	if err != nil {
		return err
	}
	text, err := sc.Data(steps.DataCalibration)
	if err != nil {
		return err
	}
	grid := p.NGrid
	if scheme != "awq" {
		grid = DefaultAWQGrid // the script's flag; GPTQ ignores it
	}
	seqLen := p.SeqLen
	args := []string{"--model", src.Dir, "--calibration", text, "--out", sc.Out,
		"--scheme", scheme, "--group-size", strconv.Itoa(group),
		"--samples", strconv.Itoa(p.Samples), "--seq-len", strconv.Itoa(seqLen), "--n-grid", strconv.Itoa(grid),
		"--observer", p.Observer, "--threads", strconv.Itoa(sc.NumThreads())}
	if p.Symmetric {
		args = append(args, "--symmetric")
	}
	if p.VDownBits == 8 {
		args = append(args, "--v-down-bits", "8")
	}
	if scheme == "awq" {
		args = append(args, "--rounding", p.Rounding)
		sc.Result.SetFact("rounding", p.Rounding)
	}
	if p.gptqRounding() {
		args = append(args, "--actorder", p.ActOrder)
		sc.Result.SetFact("actorder", p.ActOrder)
	}
	if err := sc.RunTool(ctx, ToolLLMCQuantize, args...); err != nil {
		return err
	}
	var res report.Quantize
	if err := steps.ReadReport(ToolLLMCQuantize, sc.LogPath, &res); err != nil {
		return err
	}
	layout, err := CheckCompressedTensors(sc.Out, group)
	if err != nil {
		return fmt.Errorf("%s wrote no usable checkpoint: %w", ToolLLMCQuantize, err)
	}
	sc.Result.Checks = append(sc.Result.Checks, steps.Check{Name: "compressed-tensors layout", Passed: true,
		Detail: fmt.Sprintf("%d linears packed into int32 (%d at 8 bits, the rest at 4), one scale per %d columns, format %s", layout.Packed, layout.EightBit, group, layout.Format)})
	sc.Result.SetFile("model", "config.json")
	sc.Result.SetMetric("group_size", float64(group))
	sc.Result.SetMetric("calibration_samples", float64(res.Samples))
	sc.Result.SetMetric("calibration_seq_len", float64(seqLen))
	sc.Result.SetMetric("quantized_linears", float64(layout.Packed))
	if p.VDownBits == 8 {
		sc.Result.SetMetric("eight_bit_linears", float64(layout.EightBit))
		v := fmt.Sprintf("%d v_proj and down_proj linears at 8 bits (same groups), the others at 4", layout.EightBit)
		if layout.EightBit == 0 {
			v = "none: no linear of this model is named like a v_proj or down_proj, so every one is 4-bit"
		}
		sc.Result.SetFact("v_down", v)
	}
	sc.Result.SetFact("scheme", scheme)
	if p.Symmetric {
		sc.Result.SetFact("weights", "symmetric")
	} else {
		sc.Result.SetFact("weights", "asymmetric (a zero point per group)")
	}
	sc.Result.SetFact("observer", p.Observer)
	if p.GroupSize == 0 {
		sc.Result.SetFact("group_size", fmt.Sprintf("%d, the largest of %s that divides every linear layer's input width (%s)",
			group, joinInts(groupSizeCandidates, ", "), joinInts(widths, ", ")))
	} else {
		sc.Result.SetFact("group_size", fmt.Sprintf("%d, from the recipe", group))
	}
	sc.Result.SetFact("calibration", fmt.Sprintf("%d samples of %d tokens from a %d-token text", res.Samples, seqLen, res.CalibrationTokens))
	if scheme == "awq" {
		sc.Result.SetFact("awq_grid", fmt.Sprintf("%d candidate scales per layer", grid))
	}
	for name, v := range res.Versions {
		sc.Result.SetVersion(name, v)
	}
	return nil
}

// LinearWidths returns the distinct input widths of a transformer's linear
// layers from its config.json: the hidden size (q/k/v, gate/up), the
// attention output (heads x head_dim, into o_proj) and the MLP width (into
// down_proj). Multimodal configs keep the language model under text_config.
func LinearWidths(configPath string) ([]int, error) {
	b, err := boundedfile.Read(configPath, boundedfile.ModelJSONLimit)
	if err != nil {
		return nil, fmt.Errorf("read the model's config: %w", err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", configPath, err)
	}
	if tc, ok := cfg["text_config"].(map[string]any); ok {
		cfg = tc
	}
	num := func(k string) int {
		f, _ := cfg[k].(float64)
		return int(f)
	}
	hidden := num("hidden_size")
	if hidden <= 0 {
		return nil, fmt.Errorf("%s has no hidden_size: edgepipe cannot tell this model's layer widths", configPath)
	}
	set := map[int]bool{hidden: true}
	if heads := num("num_attention_heads"); heads > 0 {
		hd := num("head_dim")
		if hd <= 0 {
			hd = hidden / heads
		}
		set[heads*hd] = true
	}
	for _, k := range []string{"intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size"} {
		if w := num(k); w > 0 {
			set[w] = true
		}
	}
	var widths []int
	for w := range set {
		widths = append(widths, w)
	}
	sort.Ints(widths)
	return widths, nil
}

// ChooseGroupSize returns the recipe's group size if it divides every
// width, or, when the recipe sets none (0), the largest candidate that does.
func ChooseGroupSize(asked int, widths []int) (int, error) {
	if asked < 0 {
		return 0, fmt.Errorf("group_size %d: it must be a positive number of columns per scale (32, 64 or 128)", asked)
	}
	if asked > 0 {
		if bad := notDivided(asked, widths); len(bad) > 0 {
			hint := "set with: {group_size: N} to a size that divides them all"
			if g, err := ChooseGroupSize(0, widths); err == nil {
				hint = fmt.Sprintf("use group_size %d (or leave it out: edgepipe then picks %d)", g, g)
			}
			return 0, fmt.Errorf("group_size %d does not divide this model's linear layer widths (%s; not a multiple of %d: %s): every group must lie within one row, %s",
				asked, joinInts(widths, ", "), asked, joinInts(bad, ", "), hint)
		}
		return asked, nil
	}
	for _, g := range groupSizeCandidates {
		if len(notDivided(g, widths)) == 0 {
			return g, nil
		}
	}
	return 0, fmt.Errorf("none of the group sizes %s divides this model's linear layer widths (%s): set with: {group_size: N} to a size that divides them all",
		joinInts(groupSizeCandidates, ", "), joinInts(widths, ", "))
}

func notDivided(g int, widths []int) []int {
	var bad []int
	for _, w := range widths {
		if w%g != 0 {
			bad = append(bad, w)
		}
	}
	return bad
}

func joinInts(xs []int, sep string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, sep)
}

// CompressedLayout is what CheckCompressedTensors found.
type CompressedLayout struct {
	Format   string // compressed-tensors format (pack-quantized)
	Packed   int    // linears stored packed (4 or 8 bits)
	EightBit int    // of those, the 8-bit ones
}

// CheckCompressedTensors checks that dir holds a W4A16 compressed-tensors
// checkpoint with the given group size, as vLLM's loader reads it: a
// quantization_config of quant_method compressed-tensors with 4-bit group
// weights, and per quantized linear an int32 weight_packed [out, in/8] and a
// weight_scale [out, in/group].
func CheckCompressedTensors(dir string, group int) (CompressedLayout, error) {
	var out CompressedLayout
	b, err := boundedfile.Read(filepath.Join(dir, "config.json"), boundedfile.ModelJSONLimit)
	if err != nil {
		return out, err
	}
	var cfg struct {
		QC *struct {
			QuantMethod  string `json:"quant_method"`
			Format       string `json:"format"`
			ConfigGroups map[string]struct {
				Weights *struct {
					NumBits   int    `json:"num_bits"`
					Strategy  string `json:"strategy"`
					GroupSize int    `json:"group_size"`
				} `json:"weights"`
			} `json:"config_groups"`
		} `json:"quantization_config"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return out, fmt.Errorf("config.json: %w", err)
	}
	qc := cfg.QC
	if qc == nil || qc.QuantMethod != "compressed-tensors" {
		return out, fmt.Errorf("config.json has no compressed-tensors quantization_config")
	}
	if len(qc.ConfigGroups) == 0 {
		return out, fmt.Errorf("quantization_config has no config_groups")
	}
	widths := map[int64]bool{}
	for name, g := range qc.ConfigGroups {
		if w := g.Weights; w == nil || (w.NumBits != 4 && w.NumBits != 8) || w.Strategy != "group" || w.GroupSize != group {
			return out, fmt.Errorf("quantization_config group %s is not 4- or 8-bit weights in groups of %d: %+v", name, group, g.Weights)
		}
		widths[int64(g.Weights.NumBits)] = true
	}
	out.Format = qc.Format
	tensors := map[string]safetensorsEntry{}
	shards, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(shards) == 0 {
		return out, fmt.Errorf("no *.safetensors in the output")
	}
	for _, s := range shards {
		h, err := readSafetensorsHeader(s)
		if err != nil {
			return out, err
		}
		for k, v := range h {
			tensors[k] = v
		}
	}
	for name, t := range tensors {
		base, ok := strings.CutSuffix(name, ".weight_packed")
		if !ok {
			continue
		}
		scale, ok := tensors[base+".weight_scale"]
		if t.Dtype != "I32" || len(t.Shape) != 2 || !ok || len(scale.Shape) != 2 || scale.Shape[0] != t.Shape[0] {
			return out, fmt.Errorf("%s: want an int32 [out, in*bits/32] weight_packed beside a 2-D [out, in/group] weight_scale", base)
		}
		// The scales give the input width (one per group of columns); the
		// packed width then says how many bits each weight has.
		in := scale.Shape[1] * int64(group)
		bits := t.Shape[1] * 32 / max(in, 1)
		if t.Shape[1]*32 != bits*in || !widths[bits] {
			return out, fmt.Errorf("%s: weight_packed %v and weight_scale %v do not hold one scale per %d input columns at %s bits", base, t.Shape, scale.Shape, group, joinBits(widths))
		}
		out.Packed++
		if bits == 8 {
			out.EightBit++
		}
	}
	if out.Packed == 0 {
		return out, fmt.Errorf("no packed INT4 weights (*.weight_packed) in the safetensors")
	}
	return out, nil
}

// joinBits lists the configured widths, "4" or "4 or 8".
func joinBits(widths map[int64]bool) string {
	var ws []string
	for _, b := range []int64{4, 8} {
		if widths[b] {
			ws = append(ws, strconv.FormatInt(b, 10))
		}
	}
	return strings.Join(ws, " or ")
}

type safetensorsEntry struct {
	Dtype string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// readSafetensorsHeader reads a safetensors file's JSON header (an 8-byte
// little-endian length, then the JSON), without reading the tensors.
func readSafetensorsHeader(path string) (map[string]safetensorsEntry, error) {
	f, _, err := boundedfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil {
		return nil, fmt.Errorf("%s: not a safetensors file: %w", filepath.Base(path), err)
	}
	if n > 100<<20 {
		return nil, fmt.Errorf("%s: safetensors header of %d bytes is implausible", filepath.Base(path), n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("%s: truncated safetensors header: %w", filepath.Base(path), err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: safetensors header: %w", filepath.Base(path), err)
	}
	out := map[string]safetensorsEntry{}
	for k, v := range raw {
		if k == "__metadata__" {
			continue
		}
		var e safetensorsEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", filepath.Base(path), k, err)
		}
		out[k] = e
	}
	return out, nil
}

func (llmcPerplexity) Name() string       { return "llmc-perplexity" }
func (llmcPerplexity) Version() int       { return 2 }
func (llmcPerplexity) NewParams() any     { return &steps.Eval{} }
func (llmcPerplexity) Tools(any) []string { return []string{ToolLLMCPerplexity} }
func (llmcPerplexity) Resources(any) steps.Resources {
	// compressed-tensors unpacks the INT4 weights to fp32 on load
	// (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 236, ModelFactor: 2.77}
}

func (llmcPerplexity) Run(ctx context.Context, sc *steps.Context) error {
	model, err := sc.Input(llmcQuantize{})
	if err != nil {
		return err
	}
	base, err := sc.Input(shared.HFPerplexity)
	if err != nil {
		return err
	}
	res, err := shared.RunTransformersPerplexity(ctx, sc, *steps.ParamsOf[steps.Eval](sc.Params), ToolLLMCPerplexity, model.Dir,
		"--scores-out", sc.Out, "--baseline-scores", base.Dir)
	if err != nil {
		return err
	}
	bp := base.Result.Perplexity
	if bp == nil {
		return fmt.Errorf("the baseline step %s recorded no perplexity", base.StepID)
	}
	got := shared.TransformersPerplexity(res, "transformers+compressed-tensors")
	got.Baseline = bp.PPL
	if err := shared.Interval(base, sc.Out, got); err != nil {
		return err
	}
	sc.Result.Perplexity = got
	// The baseline ran in another toolchain (another transformers); the
	// numbers only compare if both tokenized the text the same way and
	// scored the same chunks, so that is checked, not assumed.
	same := bp.EvalTokens == res.Scored && bp.Chunks == res.Chunks && bp.Context == res.Ctx
	sc.Result.Checks = append(sc.Result.Checks, steps.Check{Name: "same evaluation tokens as the baseline", Passed: same,
		Detail: fmt.Sprintf("converted: %d tokens scored in %d chunks of %d; baseline %s: %d in %d chunks of %d",
			res.Scored, res.Chunks, res.Ctx, base.StepID, bp.EvalTokens, bp.Chunks, bp.Context)})
	return nil
}
