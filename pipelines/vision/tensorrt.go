package vision

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/pipelines/nvidia"
	"github.com/edgepipe/edgepipe/steps"
)

// tensorrt-int8 is explicit quantization, the way NVIDIA documents INT8 for
// TensorRT 10: the calibrators of implicit quantization
// (IInt8EntropyCalibrator2 and the rest, trtexec --calib) are "Deprecated
// in TensorRT 10.1. Superseded by explicit quantization." (TensorRT C++ API,
// deprecated list), TensorRT 11 removes BuilderFlag.INT8 and the
// calibrator ("Explicit quantization with Q/DQ nodes", the 10.x-to-11.x
// migration reference), and the Explicit Quantization guide says "Use
// explicit quantization with Strong Typing. Precision-control build flags
// are not required and should not be specified." So the scales come from a
// QDQ ONNX model calibrated here (ONNX Runtime's static quantizer, the
// onnx-int8 path with int8 activations of zero point 0, which TensorRT
// requires), and the engine is built on the device with:
//
//	trtexec --onnx=model.onnx --stronglyTyped --saveEngine=model.engine \
//	  --minShapes=pixel_values:1x3xHxW --optShapes=pixel_values:8x3xHxW --maxShapes=pixel_values:32x3xHxW \
//	  --skipInference --profilingVerbosity=detailed --exportLayerInfo=layers.json
//
// The gate scores the QDQ model here on ONNX Runtime with its optimizations
// off, so each Q/DQ pair is computed as written: TensorRT keeps the Q/DQ
// placement and scales and computes int8 with int32 accumulation, so the
// engine computes the same INT8 model (not bit for bit: it may reorder the
// float arithmetic between them). ONNX Runtime's fused kernels would score
// something else on this AVX2 CPU: on the digits model 94.71% top-1 against
// 96.94% as written (docs/vision.md), their u8 x s8 multiply-adds saturating.

// ToolTrtexec is TensorRT's command-line builder; ToolchainTensorRT the
// external toolchain that names it.
const (
	ToolTrtexec       = "trtexec"
	ToolchainTensorRT = "tensorrt"
	// KindTrtexecBuild builds the engine on an NVIDIA GPU.
	KindTrtexecBuild = "trtexec-build"
)

// Engine files inside the build step's output.
const (
	EngineFile    = "model.engine"
	LayerInfoFile = "layers.json"
)

// trtexecBuild builds the TensorRT engine from the QDQ model, on and for
// the NVIDIA GPU of the host (the Jetson).
type trtexecBuild struct{}

// TrtexecParams are a trtexec-build step's: the batch range of the
// dynamic axis and the device the engine is for.
type TrtexecParams struct {
	OptBatch int    `json:"opt_batch"`
	MaxBatch int    `json:"max_batch"`
	Device   string `json:"device"`
}

func (trtexecBuild) Name() string       { return KindTrtexecBuild }
func (trtexecBuild) Version() int       { return 1 }
func (trtexecBuild) NewParams() any     { return &TrtexecParams{} }
func (trtexecBuild) Tools(any) []string { return []string{ToolTrtexec} }
func (trtexecBuild) Resources(p any) steps.Resources {
	return steps.Resources{Cores: 2, MemoryMB: 2048,
		Host: steps.HostNeeds{NvidiaGPU: true, Device: steps.ParamsOf[TrtexecParams](p).Device}}
}

// RequireHost refuses a host without an NVIDIA GPU before the tool is
// looked up: the missing GPU is the reason to give, not a missing trtexec.
func (trtexecBuild) RequireHost(any) error {
	if ok, found := nvidia.NvidiaGPU(); !ok {
		return fmt.Errorf("trtexec (the tensorrt-int8 engine build) needs an NVIDIA GPU and this host has none (%s): "+
			"run this target on the Jetson itself (JetPack ships trtexec in /usr/src/tensorrt/bin: --tool-path /usr/src/tensorrt/bin), "+
			"or leave it out, or use --keep-going to build the other targets; the QDQ model and its gate run here", found)
	}
	return nil
}

// expandTensorRT: the shared fp32 export -> vision-quantize (QDQ, int8
// symmetric activations, calibrated) -> vision-eval on ONNX Runtime (the
// gate) and trtexec-build (the engine, on the device's GPU).
func expandTensorRT(r *recipe.Recipe, t *recipe.Target, export, ref *plan.Step, add plan.AddFunc) (*plan.Step, []string) {
	o := t.Options.(*TensorRTOptions)
	qdq := quantizeStep(r, t, &o.Int8Options, export, true, add)
	check := add(&plan.Step{ID: "vision-eval:" + strings.TrimPrefix(qdq.ID, "vision-quantize:") + "+simulated", Kind: KindEval,
		Needs: []string{qdq.ID, ref.ID}, Params: &EvalParams{Runtime: RuntimeONNX, SimulateQDQ: true}, Data: plan.EvalData(r)}, t.Name)
	params := &TrtexecParams{OptBatch: plan.Or(o.OptBatch, DefaultOptBatch), MaxBatch: plan.Or(o.MaxBatch, DefaultMaxBatch), Device: t.Device}
	// An engine is built for the GPU it is built on: one per device.
	engine := add(&plan.Step{ID: KindTrtexecBuild + ":" + strings.TrimPrefix(qdq.ID, "vision-quantize:") +
		plan.OptionSuffix(t.Options, "opt_batch", "max_batch") + "/" + t.Device,
		Kind: KindTrtexecBuild, Needs: []string{qdq.ID}, Params: params}, t.Name)
	return engine, []string{check.ID}
}

// layerInfo is the part of trtexec's --exportLayerInfo JSON the step reads.
type layerInfo struct {
	Layers []json.RawMessage `json:"Layers"`
}

func (trtexecBuild) Run(ctx context.Context, sc *steps.Context) error {
	if err := (trtexecBuild{}).RequireHost(nil); err != nil {
		return err
	}
	qdq, err := sc.Input(visionQuantize{})
	if err != nil {
		return err
	}
	p := steps.ParamsOf[TrtexecParams](sc.Params)
	if p.OptBatch < 1 || p.OptBatch > p.MaxBatch {
		return fmt.Errorf("trtexec-build: batch range 1..%d..%d: want 1 <= opt <= max", p.OptBatch, p.MaxBatch)
	}
	cfgBytes, err := boundedfile.Read(filepath.Join(qdq.Dir, "config.json"), boundedfile.ModelJSONLimit)
	if err != nil {
		return fmt.Errorf("trtexec-build: the QDQ model has no config.json: %w", err)
	}
	var cfg struct {
		InputSize  int `json:"input_size"`
		InChannels int `json:"in_channels"`
	}
	if err := json.Unmarshal(cfgBytes, &cfg); err != nil || cfg.InputSize < 1 || cfg.InChannels < 1 {
		return fmt.Errorf("trtexec-build: config.json has no input_size and in_channels")
	}
	shape := func(n int) string {
		return fmt.Sprintf("pixel_values:%dx%dx%dx%d", n, cfg.InChannels, cfg.InputSize, cfg.InputSize)
	}
	onnxPath := filepath.Join(qdq.Dir, qdq.Result.Files["model"])
	if err := sc.RunTool(ctx, ToolTrtexec, "--onnx="+onnxPath, "--stronglyTyped", "--saveEngine="+filepath.Join(sc.Out, EngineFile),
		"--minShapes="+shape(1), "--optShapes="+shape(p.OptBatch), "--maxShapes="+shape(p.MaxBatch),
		"--skipInference", "--profilingVerbosity=detailed", "--exportLayerInfo="+filepath.Join(sc.Out, LayerInfoFile)); err != nil {
		return err
	}
	return recordEngine(sc, onnxPath, cfgBytes, p)
}

// recordEngine checks what trtexec wrote (an engine, a PASSED line, layers
// that run in int8) and ships the QDQ model and config.json beside it: the
// engine is only for the GPU that built it, the QDQ model rebuilds it on
// another.
func recordEngine(sc *steps.Context, onnxPath string, cfg []byte, p *TrtexecParams) error {
	fi, err := os.Stat(filepath.Join(sc.Out, EngineFile))
	if err != nil || fi.Size() == 0 {
		return fmt.Errorf("trtexec wrote no %s (see %s)", EngineFile, sc.LogPath)
	}
	log, err := boundedfile.Read(sc.LogPath, 64<<20)
	if err != nil || !strings.Contains(string(log), "&&&& PASSED TensorRT.trtexec") {
		return fmt.Errorf("trtexec did not report PASSED (see %s)", sc.LogPath)
	}
	info, err := boundedfile.Read(filepath.Join(sc.Out, LayerInfoFile), 64<<20)
	if err != nil {
		return fmt.Errorf("trtexec wrote no layer information %s: %w", LayerInfoFile, err)
	}
	var li layerInfo
	if err := json.Unmarshal(info, &li); err != nil {
		return fmt.Errorf("%s: %w", LayerInfoFile, err)
	}
	int8Layers := 0
	for _, l := range li.Layers {
		if strings.Contains(string(l), "Int8") {
			int8Layers++
		}
	}
	// The engine must run the quantized convolutions in int8: a build that
	// fell back to float would pass a float engine under an INT8 name.
	if int8Layers == 0 {
		return fmt.Errorf("trtexec built an engine with no Int8 layer among %d (see %s): not an INT8 engine", len(li.Layers), LayerInfoFile)
	}
	qdq, err := os.ReadFile(onnxPath)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(sc.Out, "model.onnx"), qdq, 0o644); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(sc.Out, "config.json"), cfg, 0o644); err != nil {
		return err
	}
	_, found := nvidia.NvidiaGPU()
	sc.Result.SetFile("model", EngineFile)
	sc.Result.SetFact("nvidia_gpu", found)
	sc.Result.SetFact("engine_for", "the GPU of the host that built it ("+p.Device+"); model.onnx beside it rebuilds it on another")
	sc.Result.SetFact("engine_layers", fmt.Sprintf("%d of %d layers with Int8 in their layer information", int8Layers, len(li.Layers)))
	sc.Result.SetFact("batch", fmt.Sprintf("dynamic: 1..%d, tuned for %d", p.MaxBatch, p.OptBatch))
	sc.Result.SetMetric("engine_layers", float64(len(li.Layers)))
	sc.Result.SetMetric("int8_layers", float64(int8Layers))
	sc.Result.SetMetric("engine_bytes", float64(fi.Size()))
	return nil
}
