package qnn

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/pipelines/onnx"
	"github.com/edgepipe/edgepipe/pipelines/qnn/report"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// qnnQDQ quantizes the fp32 prefill graph (onnx-export with past: false)
// into a QDQ model for Qualcomm's HTP with ONNX Runtime's QNN flow:
// static shapes, qnn_preprocess_model, get_qnn_qdq_config, quantize, with
// calibration windows from the recipe's calibration text (qnn_qdq.py).
type qnnQDQ struct{}

// qnnCompile turns the QDQ model into a Hexagon context binary, with
// Qualcomm AI Hub's compile job (backend ai-hub) or the local QNN SDK
// (backend qnn-sdk). Neither can run on this project's machines: they need
// a Qualcomm account or SDK, so edgepipe's tests run them on stand-ins.
type qnnCompile struct{}

// Tools of the QNN backends: the QDQ flow and the AI Hub client run in
// the onnx family's toolchain; the QNN SDK's tools only Qualcomm
// distributes.
const (
	ToolQDQ                    = "qnn_qdq.py"
	ToolAIHub                  = "qnn_ai_hub.py"
	ToolONNXConverter          = "qnn-onnx-converter"
	ToolModelLibGenerator      = "qnn-model-lib-generator"
	ToolContextBinaryGenerator = "qnn-context-binary-generator"

	// SDK is the toolchain of the QNN SDK's tools.
	SDK = "qnn-sdk"
)

// QNN backends a target chooses with `with: {backend: ...}`.
const (
	QNNBackendHTP   = "qnn-htp"
	QNNBackendORT   = "ort-qdq"
	QNNBackendAIHub = "ai-hub"
	QNNBackendSDK   = "qnn-sdk"
)

// qnnTypes are the quantization types qnn_qdq.py accepts.
var qnnTypes = map[string]bool{"uint8": true, "int8": true, "uint16": true, "int16": true, "int4": true, "uint4": true}

func (qnnQDQ) Name() string { return "qnn-qdq" }
func (qnnQDQ) Version() int { return 1 }

// QDQParams are a qnn-qdq step's.
type QDQParams struct {
	// SeqLen is the static sequence length of the graph.
	SeqLen         int    `json:"seq_len"`
	WeightType     string `json:"weight_type"`
	ActivationType string `json:"activation_type"`
	// Samples are the calibration windows.
	Samples int `json:"samples"`
	// StaticInputs folds attention_mask and position_ids into constants
	// (the graph takes input_ids only); PerChannel quantizes the MatMul
	// weights per output channel as 1x1 Convs. Both for the HTP backend.
	StaticInputs bool `json:"static_inputs,omitempty"`
	PerChannel   bool `json:"per_channel,omitempty"`
}

func (qnnQDQ) NewParams() any     { return &QDQParams{} }
func (qnnQDQ) Tools(any) []string { return []string{ToolQDQ} }
func (qnnQDQ) Resources(params any) steps.Resources {
	// MinMax calibration keeps every tensor of the graph for every window,
	// beside the model several times over (fp32, preprocessed, QDQ); the
	// cost a window is assumed (docs/results/memory-weights.md).
	windows := int64(steps.ParamsOf[QDQParams](params).Samples)
	// Elastic: the calibrator's ONNX Runtime sessions get the grant
	// (edgepipe_threads.py), so it can run beside a single-threaded AWQ.
	return steps.Resources{Cores: 2, MinCores: 1, MemoryMB: 375 + 256*windows, ModelFactor: 13.7}
}

func (qnnQDQ) Run(ctx context.Context, sc *steps.Context) error {
	fp32, err := sc.Input(onnx.Export)
	if err != nil {
		return err
	}
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	p := steps.ParamsOf[QDQParams](sc.Params)
	seq := p.SeqLen
	if seq < 2 {
		return fmt.Errorf("qnn-qdq: seq_len must be set to the static sequence length (the pipeline uses the perplexity context)")
	}
	wt, at := p.WeightType, p.ActivationType
	if !qnnTypes[wt] || !qnnTypes[at] {
		return fmt.Errorf("qnn-qdq: weight_type %q / activation_type %q: use uint8, int8, uint16, int16, int4 or uint4", wt, at)
	}
	calib, err := sc.Data(steps.DataCalibration)
	if err != nil {
		return err
	}
	samples := p.Samples
	args := []string{"--onnx", filepath.Join(fp32.Dir, fp32.Result.Files["model"]), "--tokenizer", src.Dir,
		"--calibration", calib, "--out", sc.Out, "--seq-len", strconv.Itoa(seq), "--samples", strconv.Itoa(samples),
		"--weight-type", wt, "--activation-type", at}
	if p.StaticInputs {
		args = append(args, "--static-inputs")
	}
	if p.PerChannel {
		args = append(args, "--per-channel")
	}
	if err := sc.RunTool(ctx, ToolQDQ, args...); err != nil {
		return err
	}
	var res report.QDQ
	if err := steps.ReadReport(ToolQDQ, sc.LogPath, &res); err != nil {
		return err
	}
	if err := onnx.CheckFile(filepath.Join(sc.Out, res.Model)); err != nil {
		return err
	}
	if res.DequantizeLinear == 0 {
		return fmt.Errorf("qnn-qdq: the quantized graph has no DequantizeLinear node: nothing was quantized (see %s)", sc.LogPath)
	}
	sc.Result.SetFile("model", res.Model)
	sc.Result.SetMetric("seq_len", float64(seq))
	sc.Result.SetMetric("calibration_windows", float64(samples))
	sc.Result.SetMetric("quantize_linear", float64(res.QuantizeLinear))
	sc.Result.SetMetric("dequantize_linear", float64(res.DequantizeLinear))
	sc.Result.SetFact("quantization", fmt.Sprintf("weights %s, activations %s, MinMax calibration, static shape [1, %d]", wt, at, seq))
	if res.FloatNodes > 0 {
		sc.Result.SetFact("float_nodes", fmt.Sprintf("%d RMSNorm statistics nodes (Pow, ReduceMean, Add, Sqrt, Div) left unquantized", res.FloatNodes))
	}
	if len(res.StaticInputs) > 0 {
		sc.Result.SetFact("static_inputs", fmt.Sprintf("%s folded into constants: the graph takes input_ids only, %d tokens from position 0",
			strings.Join(res.StaticInputs, " and "), seq))
	}
	if res.RMSNorms > 0 {
		sc.Result.SetFact("rms_norms", fmt.Sprintf("%d RMSNorm chains fused into SimplifiedLayerNormalization (QNN's RmsNorm op), quantized like the rest", res.RMSNorms))
	}
	if p.PerChannel {
		if res.PerChannelConvs == 0 {
			return fmt.Errorf("qnn-qdq: per-channel weights were asked for, but %s rewrote no MatMul as a Conv (see %s)", ToolQDQ, sc.LogPath)
		}
		sc.Result.SetFact("per_channel", fmt.Sprintf("%d MatMul weights quantized per output channel as 1x1 Convs", res.PerChannelConvs))
	}
	if res.MaskConstants > 0 {
		sc.Result.SetFact("mask_constants", fmt.Sprintf("%d -inf attention-mask constants set to -1000 so 16-bit activations can hold them", res.MaskConstants))
	}
	return nil
}

func (qnnCompile) Name() string { return "qnn-compile" }
func (qnnCompile) Version() int { return 1 }

// CompileParams are a qnn-compile step's.
type CompileParams struct {
	Backend string `json:"backend"`
	Device  string `json:"device"`
	SeqLen  int    `json:"seq_len"`
	// HubDevice and HubTimeoutS are the ai-hub backend's; DSPArch the
	// qnn-sdk backend's. Empty when no value is known for the device.
	HubDevice   string `json:"hub_device,omitempty"`
	HubTimeoutS int    `json:"hub_timeout_s,omitempty"`
	DSPArch     string `json:"dsp_arch,omitempty"`
}

func (qnnCompile) NewParams() any { return &CompileParams{} }
func (qnnCompile) Resources(any) steps.Resources {
	// ai-hub waits on a cloud job; qnn-sdk compiles a model library.
	return steps.Resources{Cores: 2, MemoryMB: 4096}
}

func (qnnCompile) Tools(params any) []string {
	if steps.ParamsOf[CompileParams](params).Backend == QNNBackendSDK {
		return []string{ToolONNXConverter, ToolModelLibGenerator, ToolContextBinaryGenerator}
	}
	return []string{ToolAIHub}
}

// AIHubTokenConfigured reports whether Qualcomm AI Hub credentials exist:
// QAI_HUB_API_TOKEN, or the client.ini that `qai-hub configure` writes.
// Without them a compile job could only fail (or wait on a login), so the
// step stops before starting one.
func AIHubTokenConfigured() bool {
	if os.Getenv("QAI_HUB_API_TOKEN") != "" {
		return true
	}
	cfg := os.Getenv("QAIHUB_CLIENT_INI")
	if cfg == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return false
		}
		cfg = filepath.Join(home, ".qai_hub", "client.ini")
	}
	_, err := os.Stat(cfg)
	return err == nil
}

// qnnHubDevices maps edgepipe's device names to Qualcomm AI Hub device
// names (AI Hub compiles for a device, not an SoC).
var qnnHubDevices = map[string]string{
	"snapdragon-8-gen-3": "Samsung Galaxy S24 (Family)",
	"snapdragon-x-elite": "Snapdragon X Elite CRD",
}

// qnnDSPArch maps edgepipe's device names to the Hexagon architecture the
// HTP backend compiles a context binary for.
var qnnDSPArch = map[string]string{
	"snapdragon-8-gen-3": "v75",
	"snapdragon-x-elite": "v73",
}

func (qnnCompile) Run(ctx context.Context, sc *steps.Context) error {
	qdq, err := sc.Input(qnnQDQ{})
	if err != nil {
		return err
	}
	model := filepath.Join(qdq.Dir, qdq.Result.Files["model"])
	p := steps.ParamsOf[CompileParams](sc.Params)
	switch backend := p.Backend; backend {
	case QNNBackendAIHub:
		return qnnAIHub(ctx, sc, model, p)
	case QNNBackendSDK:
		return qnnSDK(ctx, sc, model, p)
	default:
		return fmt.Errorf("qnn-compile: backend %q: use %s or %s (%s needs no compile step)", backend, QNNBackendAIHub, QNNBackendSDK, QNNBackendORT)
	}
}

func qnnAIHub(ctx context.Context, sc *steps.Context, model string, p *CompileParams) error {
	if !AIHubTokenConfigured() {
		return fmt.Errorf("qnn-compile: the ai-hub backend needs a Qualcomm AI Hub API token, and none is configured: " +
			"run `qai-hub configure --api_token TOKEN` (it writes ~/.qai_hub/client.ini) or set QAI_HUB_API_TOKEN, " +
			"or build the target with `backend: ort-qdq`")
	}
	hubDevice := p.HubDevice
	if hubDevice == "" {
		return fmt.Errorf("qnn-compile: no Qualcomm AI Hub device is known for %q: set `with: {hub_device: NAME}` to a name `qai-hub list-devices` shows", p.Device)
	}
	out := "model.bin"
	timeout, seq := p.HubTimeoutS, p.SeqLen
	if err := sc.RunTool(ctx, ToolAIHub, "--onnx", model, "--device", hubDevice, "--seq-len", strconv.Itoa(seq),
		"--out", filepath.Join(sc.Out, out), "--timeout", strconv.Itoa(timeout)); err != nil {
		return err
	}
	var res report.AIHub
	if err := steps.ReadReport(ToolAIHub, sc.LogPath, &res); err != nil {
		return err
	}
	if st, err := os.Stat(filepath.Join(sc.Out, out)); err != nil || st.Size() == 0 {
		return fmt.Errorf("%s exited 0 but wrote no context binary %s", ToolAIHub, out)
	}
	if err := copySidecars(filepath.Dir(model), sc.Out); err != nil {
		return err
	}
	sc.Result.SetFile("model", out)
	sc.Result.SetFact("backend", "Qualcomm AI Hub compile job "+res.JobID+" for "+hubDevice+" ("+res.TargetRuntime+")")
	sc.Result.SetFact("validated", "the context binary itself is not run by edgepipe; the QDQ model it was compiled from was scored on ONNX Runtime's CPU provider")
	return nil
}

func qnnSDK(ctx context.Context, sc *steps.Context, model string, p *CompileParams) error {
	root := os.Getenv("QNN_SDK_ROOT")
	if root == "" {
		return fmt.Errorf("qnn-compile: the qnn-sdk backend needs Qualcomm's QNN SDK: set QNN_SDK_ROOT to its folder " +
			"(and put $QNN_SDK_ROOT/bin/x86_64-linux-clang on --tool-path), or build the target with `backend: ort-qdq`")
	}
	arch := p.DSPArch
	if arch == "" {
		return fmt.Errorf("qnn-compile: no Hexagon architecture is known for %q: set `with: {dsp_arch: v75}` (or the one your SoC has)", p.Device)
	}
	work := sc.Scratch
	cpp := filepath.Join(work, "model.cpp")
	// qnn-onnx-converter takes the quantization encodings from the QDQ
	// nodes, so no --input_list (calibration) is passed.
	if err := sc.RunTool(ctx, ToolONNXConverter, "--input_network", model, "--output_path", cpp); err != nil {
		return err
	}
	libs := filepath.Join(work, "libs")
	if err := sc.RunTool(ctx, ToolModelLibGenerator, "-c", cpp, "-b", filepath.Join(work, "model.bin"),
		"-o", libs, "-t", "x86_64-linux-clang"); err != nil {
		return err
	}
	htp := filepath.Join(work, "htp_config.json")
	ext := filepath.Join(work, "htp_backend_extensions.json")
	if err := os.WriteFile(htp, []byte(fmt.Sprintf(`{"graphs": [{"graph_names": ["model"], "vtcm_mb": 8, "O": 3}], "devices": [{"dsp_arch": %q}]}`+"\n", arch)), 0o644); err != nil {
		return err
	}
	extLib := filepath.Join(root, "lib", "x86_64-linux-clang", "libQnnHtpNetRunExtensions.so")
	if err := os.WriteFile(ext, []byte(fmt.Sprintf(`{"backend_extensions": {"shared_library_path": %q, "config_file_path": %q}}`+"\n", extLib, htp)), 0o644); err != nil {
		return err
	}
	if err := sc.RunTool(ctx, ToolContextBinaryGenerator,
		"--backend", filepath.Join(root, "lib", "x86_64-linux-clang", "libQnnHtp.so"),
		"--model", filepath.Join(libs, "x86_64-linux-clang", "libmodel.so"),
		"--binary_file", "model", "--output_dir", sc.Out, "--config_file", ext); err != nil {
		return err
	}
	if st, err := os.Stat(filepath.Join(sc.Out, "model.bin")); err != nil || st.Size() == 0 {
		return fmt.Errorf("%s exited 0 but wrote no model.bin in its output folder", ToolContextBinaryGenerator)
	}
	if err := copySidecars(filepath.Dir(model), sc.Out); err != nil {
		return err
	}
	sc.Result.SetFile("model", "model.bin")
	sc.Result.SetFact("backend", "QNN SDK HTP context binary for Hexagon "+arch)
	sc.Result.SetFact("validated", "the context binary itself is not run by edgepipe; the QDQ model it was compiled from was scored on ONNX Runtime's CPU provider")
	return nil
}

// copySidecars copies the tokenizer and config files beside a model, so
// the published folder is usable on its own.
func copySidecars(from, to string) error {
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || n == steps.ResultFile || filepath.Ext(n) == ".onnx" || filepath.Ext(n) == ".log" || filepath.Ext(n) == ".onnx_data" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, n))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, n), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
