package qnn

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/pipelines/qnn/report"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// qnnHTP compiles the QDQ model into a Hexagon context binary with
// Qualcomm's QNN HTP backend (the registry package onnxruntime-qnn, loaded
// into ONNX Runtime as a plugin execution provider) for the target's SoC,
// and gates the compiled model on the HTP simulator that backend runs on
// x86-64: logits against PyTorch on the first chunk, then perplexity over
// the recipe's chunks (qnn_htp.py). CPU fallback is disabled, so a node the
// backend refuses fails the step with its name instead of running on the
// CPU. It is both the published model and the target's quality check.
type qnnHTP struct{}

// Tools and toolchain of the qnn-htp backend.
const (
	ToolHTP = "qnn_htp.py"
	// Toolchain is the Python environment with onnxruntime-qnn.
	Toolchain = "qnn"
)

func (qnnHTP) Name() string { return "qnn-htp" }
func (qnnHTP) Version() int { return 2 }

// HTPParams are a qnn-htp step's.
type HTPParams struct {
	steps.Eval
	// Device is the target's device; SoCModel and HTPArch the QNN SoC
	// model id and Hexagon architecture the catalog gives it.
	Device   string `json:"device"`
	SoCModel int    `json:"soc_model"`
	HTPArch  int    `json:"htp_arch"`
	// MaxAbsLogitDiff and MinTop1 are the logits checks' limits.
	MaxAbsLogitDiff float64 `json:"max_abs_logit_diff"`
	MinTop1         float64 `json:"min_top1_agreement"`
}

func (qnnHTP) NewParams() any     { return &HTPParams{} }
func (qnnHTP) Tools(any) []string { return []string{ToolHTP} }
func (qnnHTP) Resources(any) steps.Resources {
	// The HTP simulator holds the prepared graph and its weights; PyTorch
	// is loaded once for the logits check.
	// One model's peak; the split between the fixed part and the model's
	// is assumed (docs/results/memory-weights.md).
	// Elastic: ONNX Runtime and torch get the grant (edgepipe_threads.py).
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 1250, ModelFactor: 2.4}
}

func (qnnHTP) Run(ctx context.Context, sc *steps.Context) error {
	qdq, err := sc.Input(qnnQDQ{})
	if err != nil {
		return err
	}
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	base, err := sc.Input(shared.HFPerplexity)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[HTPParams](sc.Params)
	if p.SoCModel <= 0 || p.HTPArch <= 0 {
		return fmt.Errorf("qnn-htp: no QNN SoC model and HTP architecture are known for device %q: "+
			"use a device whose catalog entry has soc_model and htp_arch (edgepipe devices), or `backend: ort-qdq`", p.Device)
	}
	if !(p.MaxAbsLogitDiff > 0) || math.IsNaN(p.MinTop1) || p.MinTop1 < 0 || p.MinTop1 > 1 {
		return fmt.Errorf("qnn-htp: max_abs_logit_diff must be positive and min_top1_agreement in [0, 1] (the pipeline sets them per format)")
	}
	text, err := sc.Data(steps.DataEval)
	if err != nil {
		return err
	}
	args := []string{"--qdq", filepath.Join(qdq.Dir, qdq.Result.Files["model"]), "--hf", src.Dir, "--text", text,
		"--out", sc.Out, "--ctx", strconv.Itoa(p.Chunk), "--soc-model", strconv.Itoa(p.SoCModel),
		"--htp-arch", strconv.Itoa(p.HTPArch)}
	if p.MaxChunks > 0 {
		args = append(args, "--chunks", strconv.Itoa(p.MaxChunks))
	}
	// Per-token scores for the delta's interval, and the KL divergence
	// and top-1 agreement against the baseline's top tokens. Out is the
	// published model: the scores go to scratch.
	scores := filepath.Join(sc.Scratch, "scores")
	if err := os.MkdirAll(scores, 0o755); err != nil {
		return err
	}
	args = append(args, "--scores-out", scores, "--baseline-scores", base.Dir)
	if err := sc.RunTool(ctx, ToolHTP, args...); err != nil {
		if refused := RefusedNodes(sc.LogPath); refused != "" {
			return fmt.Errorf("QNN's HTP backend refused nodes of the graph for %s (CPU fallback is disabled, so none runs on the CPU):\n%s\n%w", p.Device, refused, err)
		}
		return err
	}
	var res report.HTP
	if err := steps.ReadReport(ToolHTP, sc.LogPath, &res); err != nil {
		return err
	}
	if err := checkHTPOutputs(sc.Out, &res); err != nil {
		return err
	}
	g := res.Gate
	pp, err := shared.AgainstBaseline(base, ToolHTP, sc.LogPath, shared.Scored{PPL: g.PPL, Tokens: g.Scored, Chunks: g.Chunks, Ctx: g.Ctx,
		KLDivergence: g.KLDivergence, Top1Agreement: g.BaselineTop1, Out: scores}, "")
	if err != nil {
		return err
	}
	if err := copySidecars(filepath.Dir(filepath.Join(qdq.Dir, qdq.Result.Files["model"])), sc.Out); err != nil {
		return err
	}
	recordHTP(sc, p, &res, pp)
	return nil
}

// RefusedNodes is what qnn_htp.py (and vision_qnn.py) quoted from QNN's execution provider
// about the nodes it refused (op type, node name, reason), at most 20
// lines; "" when the log has none.
func RefusedNodes(logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "qnn_htp: refused: "); ok && len(lines) < 20 {
			lines = append(lines, "  "+rest)
		}
	}
	return strings.Join(lines, "\n")
}

// checkHTPOutputs refuses a run that wrote no EPContext model, no context
// binary, no gate or no logits comparison.
func checkHTPOutputs(out string, res *report.HTP) error {
	if res.Model == "" || res.ContextBinary == "" {
		return fmt.Errorf("%s reported no EPContext model or context binary", ToolHTP)
	}
	for _, f := range []string{res.Model, res.ContextBinary} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			return fmt.Errorf("%s exited 0 but wrote no %s", ToolHTP, f)
		}
	}
	if res.Gate == nil {
		return fmt.Errorf("%s reported no gate: it compiled the model only (--compile-only)", ToolHTP)
	}
	if !res.Gate.Ran() {
		return fmt.Errorf("%s reported no logits comparison", ToolHTP)
	}
	if res.QNNVersion == "" {
		return fmt.Errorf("%s did not report the QNN version it ran", ToolHTP)
	}
	return nil
}

func recordHTP(sc *steps.Context, p *HTPParams, res *report.HTP, pp *steps.Perplexity) {
	where := fmt.Sprintf("QNN %s HTP backend, HTP simulator on x86-64 (onnxruntime-qnn %s, onnxruntime %s), CPU fallback disabled",
		res.QNNVersion, res.ORTQNN, res.ORT)
	g := res.Gate
	diff, top1, positions := *g.MaxAbs, *g.Top1, *g.Positions
	sc.Result.Checks = append(sc.Result.Checks,
		steps.Check{Name: "logits-vs-pytorch", Passed: !math.IsNaN(diff) && diff <= p.MaxAbsLogitDiff,
			Detail: fmt.Sprintf("on the HTP simulator: max |logit difference| against PyTorch over %d positions is %.4g (limit %.4g; mean %.4g)",
				positions, diff, p.MaxAbsLogitDiff, *g.MeanAbs)},
		steps.Check{Name: "top1-vs-pytorch", Passed: top1 >= p.MinTop1,
			Detail: fmt.Sprintf("on the HTP simulator: the same top-1 token as PyTorch at %.1f%% of %d positions (at least %.0f%%)",
				100*top1, positions, 100*p.MinTop1)})
	pp.Backend = where
	sc.Result.Perplexity = pp
	sc.Result.SetFile("model", res.Model)
	sc.Result.SetFile("context_binary", res.ContextBinary)
	sc.Result.SetVersion("qnn", res.QNNVersion)
	sc.Result.SetVersion("onnxruntime-qnn", res.ORTQNN)
	sc.Result.SetFact("backend", fmt.Sprintf("QNN %s HTP backend (Qualcomm's compiler, from onnxruntime-qnn %s): EPContext model + context binary for %s (soc_model %d, htp_arch v%d)",
		res.QNNVersion, res.ORTQNN, p.Device, p.SoCModel, p.HTPArch))
	sc.Result.SetFact("validated", fmt.Sprintf("logits and perplexity (%d chunks of %d tokens) on %s; not run on a phone", g.Chunks, g.Ctx, where))
	sc.Result.SetFact("soc", fmt.Sprintf("%s: soc_model %d, htp_arch v%d", p.Device, p.SoCModel, p.HTPArch))
	sc.Result.SetFact("simulator", fmt.Sprintf("compile %.1f s; %.1f s per chunk of %d tokens on the HTP simulator, over %d chunks "+
		"(the simulator's speed on this host, not a device latency)", res.CompileS, g.SecondsPerChunk, g.Ctx, g.Chunks))
	sc.Result.SetMetric("compile_seconds", res.CompileS)
	sc.Result.SetMetric("simulator_seconds_per_chunk", g.SecondsPerChunk)
	sc.Result.SetMetric("gate_chunks", float64(g.Chunks))
	sc.Result.SetMetric("max_abs_logit_diff", diff)
	sc.Result.SetMetric("max_abs_logit_diff_limit", p.MaxAbsLogitDiff)
	sc.Result.SetMetric("mean_abs_logit_diff", *g.MeanAbs)
	sc.Result.SetMetric("logits_top1_agreement", top1)
	sc.Result.SetMetric("logits_top1_agreement_min", p.MinTop1)
}
