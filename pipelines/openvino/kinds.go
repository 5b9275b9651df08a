package openvino

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/pipelines/openvino/report"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// ovExport exports a Hugging Face checkpoint to an uncompressed, stateful
// OpenVINO IR with optimum-intel (openvino_export.py).
type ovExport struct{}

// ovQuantize compresses the export's weights with NNCF through
// optimum-intel (openvino_quantize.py).
type ovQuantize struct{}

// ovValidate scores an IR with OpenVINO's CPU plugin on the baseline's
// tokens and chunks (openvino_validate.py), and compares its first chunk's
// logits with PyTorch's.
type ovValidate struct{}

// ModelFile is the IR every step of the family names as its "model".
const ModelFile = "openvino_model.xml"

// ExportParams are an openvino-export step's.
type ExportParams struct {
	// TrustRemoteCode lets optimum-intel run the checkpoint's own model
	// code; only when the recipe's model.trust_remote_code says so.
	TrustRemoteCode bool `json:"trust_remote_code"`
}

func (ovExport) Name() string       { return "openvino-export" }
func (ovExport) Version() int       { return 1 }
func (ovExport) NewParams() any     { return &ExportParams{} }
func (ovExport) Tools(any) []string { return []string{ToolExport} }
func (ovExport) Resources(any) steps.Resources {
	// The fp32 model, its TorchScript trace and the converted IR at once.
	// One model's peak; the split between the fixed part and the model's
	// is assumed (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 900, ModelFactor: 1.8}
}

// checkIR checks the IR a tool reported is there and is what the family
// needs, a stateful model from input_ids to logits, and records it.
func checkIR(sc *steps.Context, tool string, res *report.IR) error {
	if res.Model != ModelFile {
		return fmt.Errorf("%s reported the model %q, not %s (see %s)", tool, res.Model, ModelFile, sc.LogPath)
	}
	if err := CheckIR(filepath.Join(sc.Out, ModelFile)); err != nil {
		return err
	}
	if !contains(res.Inputs, "input_ids") || !contains(res.Outputs, "logits") {
		return fmt.Errorf("%s: the IR takes %v and gives %v: it needs input_ids and logits", tool, res.Inputs, res.Outputs)
	}
	if !res.Stateful {
		return fmt.Errorf("%s: the IR is not stateful (no KV cache in its state), which OpenVINO GenAI's NPU pipeline needs", tool)
	}
	for name, v := range res.Versions {
		sc.Result.SetVersion(name, v)
	}
	sc.Result.SetFile("model", ModelFile)
	sc.Result.SetFact("inputs", strings.Join(res.Inputs, ","))
	return nil
}

// weightFacts records the IR's weight constants by element type, as read
// back from the file.
func weightFacts(sc *steps.Context, res *report.IR) {
	types := make([]string, 0, len(res.Weights))
	for t := range res.Weights {
		types = append(types, t)
	}
	sort.Strings(types)
	var parts []string
	for _, t := range types {
		w := res.Weights[t]
		parts = append(parts, fmt.Sprintf("%s: %d constants, %d elements, %d bytes", t, w.Constants, w.Elements, w.Bytes))
	}
	sc.Result.SetFact("weights", strings.Join(parts, "; "))
	sc.Result.SetMetric("low_bit_weight_fraction", res.LowBitFraction)
}

func (ovExport) Run(ctx context.Context, sc *steps.Context) error {
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	args := []string{"--model", src.Dir, "--out", sc.Out, "--threads", strconv.Itoa(sc.NumThreads())}
	if steps.ParamsOf[ExportParams](sc.Params).TrustRemoteCode {
		args = append(args, "--trust-remote-code")
	}
	if err := sc.RunTool(ctx, ToolExport, args...); err != nil {
		return err
	}
	var res report.Export
	if err := steps.ReadReport(ToolExport, sc.LogPath, &res); err != nil {
		return err
	}
	if err := checkIR(sc, ToolExport, &res.IR); err != nil {
		return err
	}
	weightFacts(sc, &res.IR)
	return nil
}

func (ovQuantize) Name() string { return "openvino-quantize" }
func (ovQuantize) Version() int { return 1 }

// QuantizeParams are an openvino-quantize step's: optimum-intel's
// OVWeightQuantizationConfig, every value written by the planner.
type QuantizeParams struct {
	WeightFormat      string  `json:"weight_format"` // int4 | int8
	Sym               bool    `json:"sym"`
	GroupSize         int     `json:"group_size,omitempty"` // int4; -1: channel-wise
	GroupSizeFallback string  `json:"group_size_fallback,omitempty"`
	Ratio             float64 `json:"ratio"`
	AllLayers         bool    `json:"all_layers,omitempty"`
	AWQ               bool    `json:"awq,omitempty"`
	ScaleEstimation   bool    `json:"scale_estimation,omitempty"`
	GPTQ              bool    `json:"gptq,omitempty"`
	Samples           int     `json:"calibration_samples,omitempty"`
	SeqLen            int     `json:"calibration_seq_len,omitempty"`
	TrustRemoteCode   bool    `json:"trust_remote_code"`
}

func (p *QuantizeParams) dataAware() bool { return p.AWQ || p.ScaleEstimation || p.GPTQ }

// check refuses parameters the script cannot take: the planner writes
// every value, so a bad one is a plan built (or overridden) wrongly.
func (p *QuantizeParams) check() error {
	switch {
	case p.WeightFormat != "int4" && p.WeightFormat != "int8":
		return fmt.Errorf("openvino-quantize: weight_format must be int4 or int8, not %q", p.WeightFormat)
	case p.WeightFormat == "int4" && (p.GroupSize == 0 || p.GroupSize < -1):
		return fmt.Errorf("openvino-quantize: group_size must be -1 (channel-wise) or positive, not %d", p.GroupSize)
	case p.WeightFormat == "int4" && p.GroupSizeFallback != "adjust" && p.GroupSizeFallback != "error" && p.GroupSizeFallback != "ignore":
		return fmt.Errorf("openvino-quantize: group_size_fallback must be adjust, error or ignore, not %q", p.GroupSizeFallback)
	case !(p.Ratio > 0 && p.Ratio <= 1):
		return fmt.Errorf("openvino-quantize: ratio must be in (0, 1], not %v", p.Ratio)
	case p.WeightFormat == "int8" && (p.dataAware() || p.AllLayers):
		return fmt.Errorf("openvino-quantize: awq, scale_estimation, gptq and all_layers are int4 options")
	case p.dataAware() && (p.Samples < 1 || p.SeqLen < 8):
		return fmt.Errorf("openvino-quantize: the data-aware methods need calibration_samples >= 1 and calibration_seq_len >= 8 (got %d and %d)", p.Samples, p.SeqLen)
	}
	return nil
}

func (ovQuantize) NewParams() any     { return &QuantizeParams{} }
func (ovQuantize) Tools(any) []string { return []string{ToolQuantize} }
func (ovQuantize) Resources(any) steps.Resources {
	// The fp32 IR, its compressed copy and, for the data-aware methods,
	// the activations NNCF collects.
	// One model's peak; the split between the fixed part and the model's
	// is assumed (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 800, ModelFactor: 1.55}
}

func (p *QuantizeParams) args(in, out, calibration string, threads int) []string {
	args := []string{"--in", in, "--out", out, "--weight-format", p.WeightFormat,
		"--ratio", strconv.FormatFloat(p.Ratio, 'g', -1, 64), "--threads", strconv.Itoa(threads)}
	if p.Sym {
		args = append(args, "--sym")
	}
	if p.WeightFormat == "int4" {
		args = append(args, "--group-size", strconv.Itoa(p.GroupSize), "--group-size-fallback", p.GroupSizeFallback)
	}
	for _, f := range []struct {
		on   bool
		flag string
	}{{p.AllLayers, "--all-layers"}, {p.AWQ, "--awq"}, {p.ScaleEstimation, "--scale-estimation"}, {p.GPTQ, "--gptq"},
		{p.TrustRemoteCode, "--trust-remote-code"}} {
		if f.on {
			args = append(args, f.flag)
		}
	}
	if p.dataAware() {
		args = append(args, "--calibration", calibration, "--samples", strconv.Itoa(p.Samples), "--seq-len", strconv.Itoa(p.SeqLen))
	}
	return args
}

func (ovQuantize) Run(ctx context.Context, sc *steps.Context) error {
	export, err := sc.Input(ovExport{})
	if err != nil {
		return err
	}
	p := steps.ParamsOf[QuantizeParams](sc.Params)
	if err := p.check(); err != nil {
		return err
	}
	calibration := ""
	if p.dataAware() {
		if calibration, err = sc.Data(steps.DataCalibration); err != nil {
			return err
		}
	}
	if err := sc.RunTool(ctx, ToolQuantize, p.args(export.Dir, sc.Out, calibration, sc.NumThreads())...); err != nil {
		return err
	}
	var res report.Quantize
	if err := steps.ReadReport(ToolQuantize, sc.LogPath, &res); err != nil {
		return err
	}
	if err := checkIR(sc, ToolQuantize, &res.IR); err != nil {
		return err
	}
	low := "u4"
	if p.WeightFormat == "int8" {
		low = "u8"
	}
	if res.Weights[low].Elements == 0 && res.Weights[strings.Replace(low, "u", "i", 1)].Elements == 0 {
		return fmt.Errorf("openvino-quantize: the IR holds no %s weights: NNCF compressed nothing to %s (see %s)", low, p.WeightFormat, sc.LogPath)
	}
	weightFacts(sc, &res.IR)
	if p.dataAware() {
		sc.Result.SetMetric("calibration_samples", float64(res.CalibrationSamples))
		sc.Result.SetMetric("calibration_seq_len", float64(p.SeqLen))
	}
	return nil
}

func (ovValidate) Name() string { return "openvino-validate" }
func (ovValidate) Version() int { return 2 }

// DefaultPrecision is the CPU plugin's inference precision in the gate:
// f32, so what moves perplexity is the weight compression, not the CPU's
// bf16 arithmetic (an Intel NPU computes in FP16; this is not that).
const DefaultPrecision = "f32"

// ValidateParams are an openvino-validate step's.
type ValidateParams struct {
	steps.Eval
	Precision string `json:"precision"`
}

func (ovValidate) NewParams() any     { return &ValidateParams{} }
func (ovValidate) Tools(any) []string { return []string{ToolValidate} }
func (ovValidate) Resources(any) steps.Resources {
	// OpenVINO's compiled model and the PyTorch reference model at once.
	// One model's peak; the split between the fixed part and the model's
	// is assumed (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 1050, ModelFactor: 2}
}

func (ovValidate) Run(ctx context.Context, sc *steps.Context) error {
	if len(sc.Inputs) == 0 || sc.Inputs[0].Result == nil || sc.Inputs[0].Result.Files["model"] == "" {
		return fmt.Errorf("step %s needs, first, the step that made the OpenVINO IR it scores", sc.StepID)
	}
	model := sc.Inputs[0]
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	base, err := sc.Input(shared.HFPerplexity)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[ValidateParams](sc.Params)
	if p.Precision != "f32" && p.Precision != "bf16" && p.Precision != "f16" {
		return fmt.Errorf("openvino-validate: precision must be f32, bf16 or f16, not %q", p.Precision)
	}
	text, err := sc.Data(steps.DataEval)
	if err != nil {
		return err
	}
	args := []string{"--ir", model.Dir, "--hf", src.Dir, "--text", text, "--ctx", strconv.Itoa(p.Chunk),
		"--precision", p.Precision, "--threads", strconv.Itoa(sc.NumThreads())}
	if p.MaxChunks > 0 {
		args = append(args, "--chunks", strconv.Itoa(p.MaxChunks))
	}
	// Per-token scores for the delta's interval, and the KL divergence
	// and top-1 agreement against the baseline's top tokens.
	args = append(args, "--scores-out", sc.Out, "--baseline-scores", base.Dir)
	if err := sc.RunTool(ctx, ToolValidate, args...); err != nil {
		return err
	}
	var res report.Validate
	if err := steps.ReadReport(ToolValidate, sc.LogPath, &res); err != nil {
		return err
	}
	pp, err := shared.AgainstBaseline(base, ToolValidate, sc.LogPath, shared.Scored{PPL: res.PPL, Tokens: res.Scored, Chunks: res.Chunks, Ctx: res.Ctx,
		KLDivergence: res.KLDivergence, Top1Agreement: res.BaselineTop1, Out: sc.Out},
		fmt.Sprintf("openvino %s CPU plugin (%s)", res.OpenVINO, res.InferencePrecision))
	if err != nil {
		return err
	}
	if res.Device != "CPU" {
		return fmt.Errorf("%s ran on %q, not the CPU plugin it was asked for (see %s)", ToolValidate, res.Device, sc.LogPath)
	}
	sc.Result.Perplexity = pp
	if res.Ran() {
		// Recorded, not gated: 4-bit weights move logits by whole units
		// while perplexity barely moves; perplexity is the gate.
		sc.Result.SetMetric("max_abs_logit_diff", *res.MaxAbs)
		sc.Result.SetMetric("mean_abs_logit_diff", *res.MeanAbs)
		sc.Result.SetMetric("logits_top1_agreement", *res.Top1)
	}
	sc.Result.SetFact("device", "OpenVINO CPU plugin on this host (not an NPU)")
	sc.Result.SetFact("inference_precision", res.InferencePrecision)
	return nil
}

// CheckIR refuses an output that cannot be an OpenVINO IR, so a tool that
// exits 0 without writing one never reaches the cache: the XML must open
// with a <net> element and the weights file beside it must exist.
func CheckIR(xml string) error {
	b := make([]byte, 512)
	f, err := os.Open(xml)
	if err != nil {
		return fmt.Errorf("the tool exited 0 but wrote no %s", filepath.Base(xml))
	}
	n, _ := f.Read(b)
	f.Close()
	if !strings.Contains(string(b[:n]), "<net ") {
		return fmt.Errorf("%s is not an OpenVINO IR (no <net> element at its start)", filepath.Base(xml))
	}
	bin := strings.TrimSuffix(xml, ".xml") + ".bin"
	if fi, err := os.Stat(bin); err != nil || fi.Size() == 0 {
		return fmt.Errorf("%s has no weights file %s", filepath.Base(xml), filepath.Base(bin))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
